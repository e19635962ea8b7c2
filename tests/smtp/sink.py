"""A real SMTP server for the mail tests (aiosmtpd): every message it accepts is written to
DIR as <n>.json (envelope sender, recipients, whether the session authenticated, the raw
message). Prints the port it listens on, then serves until killed.

  python sink.py DIR [--port N] [--refuse N] [--auth USER:PASS]
                     [--tls starttls|implicit --cert PEM --key PEM]

--refuse N answers the first N messages `451 4.3.0` (a temporary refusal) before accepting;
--auth requires AUTH PLAIN/LOGIN with these credentials (over the plain connection: a test
server on 127.0.0.1 only); --tls starttls offers STARTTLS and refuses mail before it,
--tls implicit speaks TLS from the first byte (SMTPS), both with the certificate and key given.
Each record says whether its session was encrypted ("tls").
"""

import argparse
import warnings
import asyncio
import json
import os
import ssl

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

# aiosmtpd 1.4 warns about its own use of a deprecated attribute during AUTH.
warnings.filterwarnings("ignore", category=DeprecationWarning)


class Sink:
    def __init__(self, directory, refuse):
        self.directory = directory
        self.refuse = refuse
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        if self.refuse > 0:
            self.refuse -= 1
            return "451 4.3.0 try again later"
        self.count += 1
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "authenticated": bool(session.authenticated),
            "tls": server.transport.get_extra_info("ssl_object") is not None,
            "content": envelope.content.decode("utf-8", "replace"),
        }
        path = os.path.join(self.directory, f"{self.count:06}.json")
        with open(path + ".tmp", "w") as out:
            json.dump(record, out)
        os.rename(path + ".tmp", path)
        return "250 2.0.0 OK"


def authenticator(expected):
    def check(server, session, envelope, mechanism, data):
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == expected
        return AuthResult(success=ok)

    return check


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--refuse", type=int, default=0)
    parser.add_argument("--auth")
    parser.add_argument("--tls", choices=["starttls", "implicit"])
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    handler = Sink(args.directory, args.refuse)
    options = {}
    if args.auth:
        user, password = args.auth.split(":", 1)
        options = dict(
            auth_required=True,
            auth_require_tls=False,
            authenticator=authenticator((user.encode(), password.encode())),
        )
    context = None
    if args.tls:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)
    if args.tls == "starttls":
        options.update(tls_context=context, require_starttls=True)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(handler, hostname="sink.test", **options),
        host="127.0.0.1",
        port=args.port,
        ssl=context if args.tls == "implicit" else None,
    )
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


asyncio.run(main())
