#!/usr/bin/env python3
"""A fault-injecting TCP proxy for xfer's reliability tests.

Sits between client and server on loopback. For every accepted connection it draws, from
one seeded random stream, what to do to it:

  pass      forward both ways untouched
  delay     sleep 5-300 ms before each forwarded read
  drop      close the client's connection at once, before any byte
  reset     forward N request bytes, then reset both sides (RST, SO_LINGER 0)
  truncate  forward N response bytes, then close both sides
  flip      flip one bit of the response at byte N (the client must detect it: chunks,
            manifests and frames are all hashed; HTTP framing errors are errors too)

The same seed and the same sequence of connections give the same faults.

    python3 tools/lib/faultproxy.py --listen 9000 --target 8750 --seed 7 --rate 0.3
"""
import argparse
import random
import socket
import struct
import threading
import time

KINDS = ["delay", "drop", "reset", "truncate", "flip"]


class FaultProxy:
    def __init__(self, target_port, seed, rate=0.3, listen_port=0, kinds=KINDS):
        self.target_port = target_port
        self.rng = random.Random(seed)
        self.rate = rate
        self.kinds = list(kinds)
        self.counts = {kind: 0 for kind in ["pass"] + KINDS}
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", listen_port))
        self.listener.listen(256)
        self.port = self.listener.getsockname()[1]
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.running = False
        try:
            self.listener.close()
        except OSError:
            pass

    def injected(self):
        with self.lock:
            return sum(v for k, v in self.counts.items() if k != "pass")

    def _plan(self):
        with self.lock:
            if self.rng.random() >= self.rate:
                kind = "pass"
            else:
                kind = self.rng.choice(self.kinds)
            self.counts[kind] += 1
            # Offsets span headers and small bodies as well as large ones.
            offset = int(self.rng.choice([self.rng.randrange(0, 300), self.rng.randrange(0, 70_000), self.rng.randrange(0, 2_000_000)]))
            delay_seed = self.rng.random()
        return kind, offset, delay_seed

    def _accept(self):
        while self.running:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            kind, offset, delay_seed = self._plan()
            if kind == "drop":
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            state = {"closed": False}
            rng = random.Random(delay_seed)
            threading.Thread(target=self._pump, args=(client, upstream, "request", kind, offset, rng, state), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, "response", kind, offset, rng, state), daemon=True).start()

    @staticmethod
    def _reset(*sockets):
        for s in sockets:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass

    def _pump(self, source, sink, direction, kind, offset, rng, state):
        sent = 0
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if kind == "delay":
                    time.sleep(0.005 + rng.random() * 0.295)
                if kind == "reset" and direction == "request" and sent + len(data) > offset:
                    sink.sendall(data[: max(0, offset - sent)])
                    self._reset(source, sink)
                    return
                if kind == "truncate" and direction == "response" and sent + len(data) > offset:
                    sink.sendall(data[: max(0, offset - sent)])
                    break
                if kind == "flip" and direction == "response" and sent <= offset < sent + len(data):
                    data = bytearray(data)
                    data[offset - sent] ^= 1 << rng.randrange(8)
                    data = bytes(data)
                sink.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", type=int, required=True, help="port to listen on (127.0.0.1)")
    parser.add_argument("--target", type=int, required=True, help="the xfer server's port (127.0.0.1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0.3, help="share of connections that get a fault")
    args = parser.parse_args()
    proxy = FaultProxy(args.target, args.seed, args.rate, args.listen)
    print(f"faultproxy: 127.0.0.1:{proxy.port} -> 127.0.0.1:{args.target}, seed {args.seed}, rate {args.rate}", flush=True)
    try:
        while True:
            time.sleep(5)
            print(f"faultproxy: {proxy.counts}", flush=True)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
