"""The Netesto script language: lexer, parser, interpreter -> Actions."""
