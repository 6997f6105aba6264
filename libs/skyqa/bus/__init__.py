"""Message bus over NATS JetStream: topology, publishing, durable pull consumers, KV."""

from skyqa.bus import topology
from skyqa.bus.client import Bus, BusMetrics, ConsumerConfigMismatch, Delivery
from skyqa.bus.kv import FanIn, FanInTracker, JsonKV
from skyqa.bus.retry import retry_delay

__all__ = [
    "Bus",
    "BusMetrics",
    "ConsumerConfigMismatch",
    "Delivery",
    "FanIn",
    "FanInTracker",
    "JsonKV",
    "retry_delay",
    "topology",
]
