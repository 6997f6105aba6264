"""skyqa shared library: bus, blob store, service runtime, simulator, geometry and file contracts.

Services import from here and never from each other.
"""

__version__ = "0.1.0"
