# The package's own version; tests/python checks it against the CMake project version and the
# loaded library's optireduce_version().
__version__ = "0.1.0"
