"""The files agents write and results read: ``.nflow`` samples, their columns, latency histograms, host statistics.

Pure formats and parsers: no sockets, no processes. Results depend on this
package, never on the engine that writes the files.
"""
