"""A mail relay for the mailer's TLS tests: aiosmtpd, a real SMTP server, that demands TLS
and a login before it takes a message, as a provider's submission port does.

    smtp-relay.py PORT CERT_PEM KEY_PEM starttls|implicit|clear USER PASSWORD

With `starttls` it listens for plain SMTP and refuses MAIL and AUTH before STARTTLS (port
587); with `implicit` the connection is TLS from its first byte (port 465); `clear` offers
no STARTTLS and takes the login in clear, as a relay whose offer an attacker stripped. It prints
`ready` once it listens, then one JSON line per message it took: the login that sent it,
whether the connection was encrypted, the envelope and the message's text.
"""

import json
import ssl
import sys
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def main():
    port, cert, key, mode, user, password = sys.argv[1:7]
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == user
            and auth_data.password.decode() == password
        )
        return AuthResult(success=ok, auth_data=auth_data.login.decode() if ok else None)

    class Keep:
        async def handle_DATA(self, server, session, envelope):
            encrypted = server.transport.get_extra_info("ssl_object") is not None
            print(
                json.dumps(
                    {
                        "login": session.auth_data,
                        "encrypted": encrypted,
                        "from": envelope.mail_from,
                        "to": envelope.rcpt_tos,
                        "message": envelope.content.decode("utf-8", "replace"),
                    }
                ),
                flush=True,
            )
            return "250 Message accepted"

    common = dict(
        hostname="127.0.0.1",
        port=int(port),
        auth_required=True,
        authenticator=authenticator,
    )
    if mode == "starttls":
        controller = Controller(
            Keep(), tls_context=tls, require_starttls=True, auth_require_tls=True, **common
        )
    elif mode == "implicit":
        # The whole connection is TLS: no STARTTLS to wait for before a login.
        controller = Controller(Keep(), ssl_context=tls, auth_require_tls=False, **common)
    else:
        controller = Controller(Keep(), auth_require_tls=False, **common)
    controller.start()
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
