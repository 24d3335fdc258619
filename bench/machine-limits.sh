#!/usr/bin/env bash
# The limits of this machine that bound a node restart's copy
# (docs/benchmarks.md, "Node restart"): memory copy bandwidth (one
# thread, 1 GiB copied between buffers already mapped), loopback TCP throughput (one
# connection, 1 MiB writes), and the disk's sequential write rate with
# the data made durable (fdatasync at the end).
#
#   bench/machine-limits.sh [DIR]     (DIR: where to write, default /tmp)
set -euo pipefail
dir=${1:-/tmp}
python3 - "$dir" <<'EOF'
import os, socket, sys, threading, time

def best(runs, measure):
    return max(measure() for _ in range(runs))

SOURCE = bytearray(b"\1" * (1 << 30))
TARGET = bytearray(1 << 30)
TARGET[:] = SOURCE  # every page of both mapped before timing

def memory_copy():
    begin = time.perf_counter()
    TARGET[:] = SOURCE
    seconds = time.perf_counter() - begin
    return len(SOURCE) / seconds / 1e6

def loopback_tcp():
    total = 4 << 30
    chunk = b"\0" * (1 << 20)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    received = [0]
    def receive():
        connection, _ = listener.accept()
        buffer = bytearray(1 << 20)
        while received[0] < total:
            n = connection.recv_into(buffer)
            if n == 0:
                break
            received[0] += n
        connection.close()
    receiver = threading.Thread(target=receive)
    receiver.start()
    sender = socket.create_connection(listener.getsockname())
    begin = time.perf_counter()
    sent = 0
    while sent < total:
        sender.sendall(chunk)
        sent += len(chunk)
    sender.close()
    receiver.join()
    seconds = time.perf_counter() - begin
    listener.close()
    return received[0] / seconds / 1e6

def disk_write():
    path = os.path.join(sys.argv[1], "tessera-disk-write.tmp")
    chunk = b"\1" * (1 << 20)
    total = 2 << 30
    begin = time.perf_counter()
    with open(path, "wb") as file:
        for _ in range(total // len(chunk)):
            file.write(chunk)
        file.flush()
        os.fdatasync(file.fileno())
    seconds = time.perf_counter() - begin
    os.remove(path)
    return total / seconds / 1e6

print(f"memory copy (1 thread): {best(3, memory_copy):.0f} MB/s")
print(f"loopback TCP (1 connection): {best(3, loopback_tcp):.0f} MB/s")
print(f"disk sequential write, fdatasync: {best(2, disk_write):.0f} MB/s")
EOF
