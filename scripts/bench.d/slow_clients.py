"""Slow clients against a running server (scripts/bench): opens CONNECTIONS connections that
each send half a request's headers and then nothing, as a slowloris does, and prints the
server's memory before, while they are open, and after the header timeout closed them, with
how many connections the server kept and how many it shed (503) or closed.

    python3 slow_clients.py HOST PORT SERVER_PID CONNECTIONS WAIT_SECONDS [HEADER_KB SOURCES]

With HEADER_KB, each connection then sends that many KB of headers that never end, from
SOURCES addresses of the loopback network (127.0.0.2 on) taken in turn, so that no address
passes the per-client connection cap: what the server holds for a crowd of them (the
"endless headers" row). Connections the server answered 431 and closed count as closed.
"""
import socket
import sys
import time


def status_mib(pid, field):
    """A memory figure of the process's /proc status, in MiB: VmRSS (now) or VmHWM (peak)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_mib(pid):
    return status_mib(pid, "VmRSS")


def peak_mib(pid):
    return status_mib(pid, "VmHWM")


def open_slow(host, port, header_kb=0, source=None):
    s = socket.create_connection((host, port), timeout=5, source_address=source)
    s.sendall(b"GET /api/products HTTP/1.1\r\nHost: shop\r\nX-Slow: ")
    line = b"x" * 1022 + b"\r\n" + b"X-More: "
    try:
        for _ in range(header_kb):
            s.sendall(line)
    except OSError:
        pass  # answered 431 and closed: counted below
    return s


def main():
    host, port, pid, count, wait = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    header_kb = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    sources = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    before = rss_mib(pid)
    held, failed = [], 0
    for n in range(count):
        source = (f"127.0.0.{2 + n % sources}", 0) if sources else None
        try:
            held.append(open_slow(host, port, header_kb, source))
        except OSError:
            failed += 1
    time.sleep(1)
    during = rss_mib(pid)
    shed = kept = 0
    for s in held:
        s.setblocking(False)
        try:
            data = s.recv(64)
            shed += data.startswith(b"HTTP/1.1 503")
        except BlockingIOError:
            kept += 1
        except OSError:
            pass
    time.sleep(wait)
    still_open = 0
    for s in held:
        try:
            s.setblocking(False)
            if s.recv(64) == b"":
                continue
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
    for s in held:
        s.close()
    time.sleep(1)
    after = rss_mib(pid)
    print(f"RESULT attempted={count} kept={kept} shed={shed} refused={failed} "
          f"open_after_wait={still_open} before={before:.0f} during={during:.0f} after={after:.0f} "
          f"peak={peak_mib(pid):.0f}")


if __name__ == "__main__":
    main()
