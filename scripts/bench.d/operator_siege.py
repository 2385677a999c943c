"""The operator's logins while a crowd guesses the console's password (docs/design.md, "The
operator console"). Guessers from ADDRESSES loopback addresses (127.0.1.x, 127.0.2.x, …) each
fetch the login form and send a wrong password, RATE a minute together, for SECONDS; the
global cap locks every unknown login out within the first minute. Every 3 seconds the
operator logs in with the right password, in turn from:

* a browser that logged in before the siege (its secret in a cookie);
* a browser never used, with nothing else;
* a browser never used, through a link `SERVER operator-browser` makes for it, run with
  this server's configuration (the environment this script is started with).

Prints, per kind, how many of the operator's logins got in, and `RESULT …` for scripts/bench.

    python3 operator_siege.py BASE_URL PASSWORD SERVER_BINARY [SECONDS] [RATE] [ADDRESSES]
"""
import http.client
import re
import subprocess
import sys
import threading
import time
import urllib.parse


class Browser:
    """One browser: its cookies, and the loopback address it connects from."""

    def __init__(self, base, source="127.0.0.1"):
        url = urllib.parse.urlsplit(base)
        self.host, self.port, self.source = url.hostname, url.port, source
        self.cookies = {}

    def request(self, method, path, body=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30,
                                          source_address=(self.source, 0))
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Origin"] = f"http://{self.host}:{self.port}"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read().decode(errors="replace")
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                key, _, rest = value.partition("=")
                self.cookies[key] = rest.split(";", 1)[0]
        conn.close()
        return response.status, text

    def take_link(self, path):
        """Opens a link from `server operator-browser` and presses its button."""
        _, page = self.request("GET", path)
        csrf = re.search(r'name="csrf" value="([^"]*)"', page)
        secret = path.split("browser=", 1)[1]
        if csrf:
            form = urllib.parse.urlencode({"csrf": csrf.group(1), "browser": secret})
            self.request("POST", "/operator/login/link", form)

    def log_in(self, password):
        """The login form, then the password: True when the console let this browser in."""
        _, page = self.request("GET", "/operator/login")
        csrf = re.search(r'name="csrf" value="([^"]*)"', page)
        if not csrf:
            return False
        form = urllib.parse.urlencode({"csrf": csrf.group(1), "password": password})
        status, _ = self.request("POST", "/operator/login", form)
        return status == 303


def guess(base, stop, rate, addresses):
    """Wrong passwords at `rate` a minute, each from the next address in turn."""
    n = 0
    while not stop.is_set():
        source = f"127.0.{1 + n // 250 % 200}.{1 + n % 250}"
        n = (n + 1) % addresses
        try:
            Browser(base, source).log_in("a wrong guess")
        except OSError:
            pass
        stop.wait(60 / rate)


def link(server):
    """A link from `SERVER operator-browser`: its path."""
    out = subprocess.run([server, "operator-browser"], capture_output=True, text=True, check=True)
    return re.search(r"(/operator/login\?browser=\w+)", out.stdout).group(1)


def main(base, password, server, seconds=60, rate=125, addresses=217):
    seconds, rate, addresses = int(seconds), int(rate), int(addresses)
    known = Browser(base)
    assert known.log_in(password), "the operator's own browser logs in before the siege"
    stop = threading.Event()
    crowd = threading.Thread(target=guess, args=(base, stop, rate, addresses), daemon=True)
    crowd.start()
    time.sleep(5)  # the crowd passes the global cap
    got_in = {"known": [0, 0], "new": [0, 0], "linked": [0, 0]}
    kinds = list(got_in)
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        kind = kinds[n % 3]
        browser = known if kind == "known" else Browser(base)
        if kind == "linked":
            browser.take_link(link(server))
        got_in[kind][0] += browser.log_in(password)
        got_in[kind][1] += 1
        n += 1
        time.sleep(3)
    stop.set()
    for kind, (ok, tries) in got_in.items():
        print(f"  operator from a {kind} browser: {ok} of {tries} logins got in")
    print("RESULT " + " ".join(f"{k}={ok}/{tries}" for k, (ok, tries) in got_in.items()))


if __name__ == "__main__":
    main(*sys.argv[1:])
