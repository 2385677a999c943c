"""The console's journal page on a story of ROWS entries (scripts/bench): one order of the
running server gets ROWS request entries with one succeeded payment buried in the middle,
as a shopper at the write limit leaves them. Then the operator reads it: the first page, a
page in the middle, the latest page, the money view and the search by the buried charge,
one at a time, and the middle page eight at once. Prints milliseconds (p50 and the
slowest) and every answer that was not the page.

    python3 journal_pages.py BASE_URL DATABASE_URL OPERATOR_PASSWORD ROWS
"""
import concurrent.futures
import http.cookiejar
import re
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request


def psql(url, sql):
    return subprocess.run(["psql", "-X", "-qAt", url, "-c", sql], check=True,
                          capture_output=True, text=True).stdout.strip()


def bury(url, rows):
    """ROWS requests on the first order, the payment after the first half; its entry id."""
    order = psql(url, "SELECT id FROM orders ORDER BY created_at LIMIT 1")
    half = rows // 2
    add = ("INSERT INTO order_journal (order_id, at, kind, summary, scope_tag, idempotency_key) "
           "SELECT '{o}', now() + ({start} + n) * interval '1 millisecond', 'request', "
           "'POST /api/orders/{{id}}/payments answered 409 order-already-paid: executed', "
           "'bench', 'bench-' || ({start} + n) FROM generate_series(0, {count} - 1) AS n")
    psql(url, add.format(o=order, start=0, count=half))
    paid = psql(url, "INSERT INTO order_journal (order_id, at, kind, summary, charge_id) "
                f"VALUES ('{order}', now() + {half} * interval '1 millisecond', 'payment', "
                "'payment pending → succeeded, charge ch_bench_buried', 'ch_bench_buried') "
                "RETURNING id")
    psql(url, add.format(o=order, start=half + 1, count=rows - half))
    psql(url, "ANALYZE order_journal")
    order_no = psql(url, f"SELECT order_no FROM orders WHERE id = '{order}'")
    middle = psql(url, f"SELECT id FROM order_journal WHERE order_id = '{order}' "
                       f"AND idempotency_key = 'bench-{half // 2}'")
    return order_no, paid.splitlines()[0], middle


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def operator(base, password):
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)
    page = opener.open(f"{base}/operator/login").read().decode()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode({"password": password, "csrf": csrf}).encode()
    login = urllib.request.Request(f"{base}/operator/login", data=form, headers={"Origin": base})
    try:
        opener.open(login)
    except urllib.error.HTTPError as answer:
        if answer.code != 303:
            raise
    return opener


def fetch(opener, url):
    """Milliseconds, and what was wrong with the answer (None when it was the page)."""
    started = time.monotonic()
    try:
        answer = opener.open(url)
        body = answer.read()
        wrong = None if answer.status == 200 and b'data-testid="journal"' in body else answer.status
    except urllib.error.HTTPError as answer:
        answer.read()
        wrong = None if answer.code == 303 else answer.code
    return (time.monotonic() - started) * 1000, wrong


def main():
    base, url, password, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    started = time.monotonic()
    order_no, paid, middle = bury(url, rows)
    print(f"  journal: {rows} entries written in {time.monotonic() - started:.0f} s")
    opener = operator(base, password)
    journal = f"{base}/operator/orders/{order_no}"
    pages = {
        "first": journal,
        "middle": f"{journal}?after={middle}",
        "latest": f"{journal}?latest=1",
        "money": f"{journal}?only=money",
        "search": f"{base}/operator/search?q=ch_bench_buried",
        "found": f"{journal}?from={paid}",
    }
    wrong = []
    figures = []
    for name, page in pages.items():
        fetch(opener, page)  # warm
        times = []
        for _ in range(20):
            ms, bad = fetch(opener, page)
            times.append(ms)
            if bad:
                wrong.append(f"{name}:{bad}")
        figures.append(f"{name} {statistics.median(times):.1f}/{max(times):.1f}")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: fetch(opener, pages["middle"]), range(80)))
    times = [ms for ms, _ in results]
    wrong += [f"eight-at-once:{bad}" for _, bad in results if bad]
    figures.append(f"eight at once {statistics.median(times):.1f}/{max(times):.1f}")
    print(f"  journal pages, p50/slowest ms: {', '.join(figures)}; not the page: {len(wrong)}")
    print(f"RESULT rows={rows} figures={'|'.join(f.replace(' ', '_') for f in figures)} wrong={len(wrong)}")


if __name__ == "__main__":
    main()
