#!/usr/bin/python3
"""The mail catcher of docker-compose.yml (deploy/mailcatcher.Dockerfile).

Takes every message sent to it over SMTP (port 1025, no TLS, no authentication), keeps the
last 1000 in memory and shows them over HTTP (port 8025):

  /                     a page listing them, newest first
  /messages.json        the same as JSON: id, received, from, to, subject, message_id, text
  /messages/ID.eml      one message as it arrived
  /healthz              "ok"

It delivers nothing anywhere: a place to read what the shop sends, for development and for
scripts/compose-check.
"""

import email
import email.policy
import html
import json
import os
import signal
import sys
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller

KEEP = 1000
messages = []
lock = threading.Lock()


def text_of(message):
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        return part.get_content()
    except (LookupError, UnicodeError):
        return part.get_payload(decode=True).decode("utf-8", "replace")


class Catcher:
    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        message = email.message_from_bytes(raw, policy=email.policy.default)
        with lock:
            entry = {
                "id": (messages[-1]["id"] + 1) if messages else 1,
                "received": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                "from": envelope.mail_from,
                "to": list(envelope.rcpt_tos),
                "subject": str(message.get("Subject", "")),
                "message_id": str(message.get("Message-ID", "")),
                "text": text_of(message),
                "raw": raw,
            }
            messages.append(entry)
            del messages[:-KEEP]
        print(f"mailcatcher: message {entry['id']} for {', '.join(entry['to'])}: "
              f"{entry['subject']!r}", flush=True)
        return "250 Message accepted"


def listing():
    with lock:
        return [{k: v for k, v in m.items() if k != "raw"} for m in reversed(messages)]


class Pages(BaseHTTPRequestHandler):
    def send(self, status, body, content_type):
        data = body if isinstance(body, bytes) else body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            return self.send(200, "ok\n", "text/plain; charset=utf-8")
        if path == "/messages.json":
            return self.send(200, json.dumps(listing(), indent=1), "application/json")
        if path.startswith("/messages/") and path.endswith(".eml"):
            wanted = path[len("/messages/"):-len(".eml")]
            with lock:
                found = [m["raw"] for m in messages if str(m["id"]) == wanted]
            if found:
                return self.send(200, found[0], "message/rfc822")
            return self.send(404, "no such message\n", "text/plain; charset=utf-8")
        if path == "/":
            rows = "".join(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><a href=\"/messages/{}.eml\">{}</a>"
                "</td></tr><tr><td></td><td colspan=3><pre>{}</pre></td></tr>".format(
                    m["id"], html.escape(m["received"]), html.escape(", ".join(m["to"])),
                    m["id"], html.escape(m["subject"]) or "(no subject)", html.escape(m["text"]))
                for m in listing())
            page = ("<!doctype html><meta charset=utf-8><title>Caught mail</title>"
                    "<h1>Caught mail</h1><p>{} message(s), newest first. "
                    "<a href=\"/messages.json\">JSON</a></p><table>"
                    "<tr><th>#</th><th>received</th><th>to</th><th>subject</th></tr>{}</table>"
                    ).format(len(messages), rows)
            return self.send(200, page, "text/html; charset=utf-8")
        return self.send(404, "not found\n", "text/plain; charset=utf-8")

    def log_message(self, format, *args):
        pass


def main():
    smtp_port = int(os.environ.get("SMTP_PORT", "1025"))
    http_port = int(os.environ.get("HTTP_PORT", "8025"))
    smtp = Controller(Catcher(), hostname="0.0.0.0", port=smtp_port,
                      server_hostname="mailcatcher")
    smtp.start()
    # As the first process of its container it has no default handler for SIGTERM.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"mailcatcher: SMTP on port {smtp_port}, the messages on http port {http_port}",
          flush=True)
    ThreadingHTTPServer(("0.0.0.0", http_port), Pages).serve_forever()


if __name__ == "__main__":
    main()
