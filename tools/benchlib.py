"""Helpers shared by the benchmark scripts in tools/."""
import socket


def free_port():
    """A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon after)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
