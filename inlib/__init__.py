"""The Netesto macro libraries (inlib, inlib.rateTest, ...), packaged so SOURCE finds them."""
