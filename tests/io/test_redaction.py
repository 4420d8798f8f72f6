"""Credentials never shown: a location's userinfo and secret query parameters are masked in
every error an HttpDataset or ObjectStoreDataset raises (message, ``filename``, the chained
causes a traceback prints) and in ``repr`` of datasets, ``Locations`` and ``Template``s."""

from __future__ import annotations

import asyncio
import base64
import socket
import time
import traceback

import pytest

from tests._http_server import FaultServer, RawServer
from dataloader import DataLoader
from dataloader.io import FileDataset, HttpDataset, Locations, ObjectStoreDataset, Retry, Template
from dataloader.io._redact import redact, redact_text
from tests._support import fetch_each

SECRETS = ("alice", "hunter2", "SIGSECRET", "TOKSECRET", "AZSECRET")
QUERY = "X-Amz-Signature=SIGSECRET&token=TOKSECRET&sig=AZSECRET&keep=1"
SHOWN_QUERY = "X-Amz-Signature=***&token=***&sig=***&keep=1"
FAST = Retry(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02, attempt_timeout_s=5.0)


def secret_url(port, path):
    return f"http://alice:hunter2@127.0.0.1:{port}{path}{'&' if '?' in path else '?'}{QUERY}"


def shown_url(port, path):
    return f"http://***@127.0.0.1:{port}{path}{'&' if '?' in path else '?'}{SHOWN_QUERY}"


def shown(exc):
    """What a traceback shows of ``exc`` and the exceptions it chains, less the source lines."""
    text = ""
    while exc is not None:
        text += "".join(traceback.format_exception_only(type(exc), exc)) + repr(exc)
        text += repr(getattr(exc, "filename", None))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return text


def assert_clean(exc):
    """Nothing secret in what a traceback or a log shows of ``exc``, its causes included."""
    text = shown(exc)
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, (leaked, text[-2000:])


# -- the rule -------------------------------------------------------------------------


@pytest.mark.parametrize(("location", "shown"), [
    ("https://user:pw@h/a?x=1", "https://***@h/a?x=1"),
    ("https://tok@h:8080/a", "https://***@h:8080/a"),
    ("https://h/a?X-Amz-Signature=s&X-Amz-Credential=c&X-Amz-Security-Token=t&X-Amz-Date=d",
     "https://h/a?X-Amz-Signature=***&X-Amz-Credential=***&X-Amz-Security-Token=***&X-Amz-Date=d"),
    ("https://acct.blob.core.windows.net/c/b?sv=2022&sp=r&sig=abc%2Fdef", "https://acct.blob.core.windows.net/c/b?sv=2022&sp=r&sig=***"),
    ("https://h/a?access_token=t;api-key=k&KEY=k&Signature=s&pwd=p&auth=a", "https://h/a?access_token=***;api-key=***&KEY=***&Signature=***&pwd=***&auth=***"),
    ("https://h/a#access_token=t&state=1", "https://h/a#access_token=***&state=1"),
    ("https://h/keys/token/a?monkey=1&sigma=2", "https://h/keys/token/a?monkey=1&sigma=2"),  # a path, and names that only contain 'key'/'sig'
    ("https://u:p@[::1/x?sig=s", "https://***@[::1/x?sig=***"),  # urlsplit refuses it: masked all the same
    ("data/user:pw@x/a?token=t", "data/user:pw@x/a?token=t"),  # a path, not a URL
])
def test_redact_masks_userinfo_and_secret_parameters_of_urls_only(location, shown):
    assert redact(location) == shown


@pytest.mark.parametrize("name", [
    "pass", "PASS", "private_key", "privatekey", "X-Private-Key", "jwt", "id_jwt", "client_assertion",
    "assertion", "session", "sessionid", "session_id", "JSESSIONID", "PHPSESSID", "code",
    "authorization", "Authorization", "passphrase", "hmac", "x-hmac", "pw", "PW",
])
def test_redact_masks_passwords_private_keys_jwts_assertions_sessions_and_oauth_codes(name):
    assert redact(f"https://h/cb?{name}=S3CRET&state=1") == f"https://h/cb?{name}=***&state=1"
    assert redact(f"https://h/cb#{name}=S3CRET") == f"https://h/cb#{name}=***"


@pytest.mark.parametrize("name", ["zipcode", "country_code", "passage", "bypass", "sessions_per_day", "keyframe"])
def test_redact_keeps_parameters_that_only_resemble_secret_names(name):
    assert redact(f"https://h/a?{name}=v") == f"https://h/a?{name}=v"


@pytest.mark.parametrize(("location", "shown"), [
    ("https://u:pa/ss@host/x", "https://***@host/x"),  # a raw '/' in the password
    ("https://u:pa/ss@host", "https://***@host"),
    ("https://u:p@ss@host/x", "https://***@host/x"),  # a raw '@'
    ("https://u:p@a/ss@host:8080/x?token=t&e=a@b", "https://***@host:8080/x?token=***&e=a@b"),  # both
    ("https://u:pa/ss/w@host/x#frag", "https://***@host/x#frag"),
    ("https://u:pa/ss@host/x?q=a@b", "https://***@host/x?q=a@b"),  # an '@' in the query is not userinfo
    ("https://cdn.jsdelivr.net/gh/u/r@v1/x.jpg", "https://cdn.jsdelivr.net/gh/u/r@v1/x.jpg"),  # a bare host
    ("https://registry.npmjs.org/@scope/pkg?e=a@b", "https://registry.npmjs.org/@scope/pkg?e=a@b"),
    ("http://localhost:5173/@vite/client", "http://***@vite/client"),  # a port: hidden too much, never too little
])
def test_redact_hides_a_password_holding_a_raw_slash_or_at_sign(location, shown):
    assert redact(location) == shown
    assert "pa/ss" not in redact(location) and "ss@" not in redact(location)


@pytest.mark.parametrize(("location", "shown"), [
    ("https://h/x?token=ab#cd&x=1", "https://h/x?token=***&x=1"),  # a raw '#' in a secret value: showed '#cd'
    ("https://h/x?sig=a?b&x=1", "https://h/x?sig=***&x=1"),
    ("https://h/#/cb?access_token=t&x=1", "https://h/#/cb?access_token=***&x=1"),  # a '?' in the fragment
    ("https://h/#a#access_token=t", "https://h/#a#access_token=***"),  # a second '#': showed the token
    ("https://h/x?a=1#b=2&code=c", "https://h/x?a=1#b=2&code=***"),
    ("https://h/x?a=1;token=t;b=2", "https://h/x?a=1;token=***;b=2"),
    ("https://h/x?", "https://h/x?"),
])
def test_a_secret_parameter_is_masked_wherever_a_question_mark_or_hash_puts_it(location, shown):
    assert redact(location) == shown


def test_redact_text_takes_linear_time_on_a_long_run_of_letters_before_a_scheme_separator():
    # An unbounded scheme pattern tried every start in the run up to its end: 11 s here.
    for text in ("a" * 200_000 + "://", "a" * 200_000 + " ://x", "x" + "a" * 200_000 + "://u:S3CRET@h/p"):
        started = time.perf_counter()
        shown = redact_text(text)
        assert time.perf_counter() - started < 2.0
        assert "S3CRET" not in shown
    assert redact_text("b" * 100 + "://u:S3CRET@h/p?sig=S") == "b" * 100 + "://***@h/p?sig=***"


def test_redact_text_masks_every_url_in_a_message():
    text = "GET http://u:p@h/a?sig=s in 3ms\nuri: Some(\n    https://h/b?token=t,\n)"
    assert redact_text(text) == "GET http://***@h/a?sig=*** in 3ms\nuri: Some(\n    https://h/b?token=***\n)"


def test_reprs_mask_credentials_and_the_values_written_into_secret_parameters():
    locs = Locations([secret_url(1, "/a"), "https://h/b"])
    assert repr(locs) == f"Locations(('{shown_url(1, '/a')}', 'https://h/b'), length=2)"
    template = Template("https://alice:hunter2@h/{split}/{index}?sig={sig}&v={v}", split="train", sig="AZSECRET", v=2)
    assert repr(template) == "Template('https://***@h/{split}/{index}?sig=***&v={v}', split='train', sig=***, v=2)"
    ds = HttpDataset(Locations(template, length=3))
    assert "AZSECRET" not in repr(ds) and "hunter2" not in repr(ds) and "split='train'" in repr(ds)
    plain = Template("https://h/{index}?v={v}", v="x")
    assert repr(plain) == "Template('https://h/{index}?v={v}', v='x')"


# -- HttpDataset: every error path ------------------------------------------------------

@pytest.fixture
def server():
    pytest.importorskip("aiohttp")
    s = FaultServer()
    yield s
    s.close()


class Presigning(FaultServer):
    """``/away`` redirects to ``target`` (another origin's presigned URL); else as FaultServer."""

    target = ""

    def handle(self, h):
        if h.path.startswith("/away"):
            self.redirect(h, self.target)
        else:
            super().handle(h)


@pytest.mark.timeout(60)
def test_every_http_error_names_the_url_without_its_credentials():
    pytest.importorskip("aiohttp")
    server = Presigning()
    port = server.port
    closed = socket.socket()  # bound, never listening: connections to it are refused
    closed.bind(("127.0.0.1", 0))
    other = FaultServer()
    raw = RawServer({"garbage": b"garbage\r\n\r\n"})
    try:
        server.target = secret_url(other.port, "/ok/x")
        cases = [  # (port, path, the error)
            (port, "/status/404", FileNotFoundError), (port, "/status/403", PermissionError),
            (port, "/status/500", OSError), (port, "/reset/r?fails=9", ConnectionError),
            (port, "/big?size=100000", ValueError), (port, "/big?size=100000&chunked=1", ValueError),
            (port, "/loop", OSError), (port, "/away", PermissionError),
            (port, "/slow/s?s=2", TimeoutError), (closed.getsockname()[1], "/x", ConnectionError),
            (raw.port, "/garbage", OSError),
        ]
        ds = HttpDataset([secret_url(p, path) for p, path, _ in cases], max_bytes=1000,
                         retry=Retry(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02, attempt_timeout_s=0.5))
        out = fetch_each(ds)
        for (p, path, kind), exc in zip(cases, out):
            assert isinstance(exc, kind), (path, repr(exc))
            assert_clean(exc)
            assert f"http://***@127.0.0.1:{p}{path.split('?')[0]}" in str(exc), (path, str(exc))
            if isinstance(exc, (FileNotFoundError, PermissionError)):
                assert exc.filename == shown_url(p, path)
        assert f"redirect to {shown_url(other.port, '/ok/x')}" in str(out[7])  # both URLs, masked
        assert other.count("/ok/x") == 0
    finally:
        closed.close()
        other.close()
        raw.close()
        server.close()


def whole_chain(exc):
    """``exc`` and every exception it chains, hidden ones (``__suppress_context__``) too."""
    out, todo = [], [exc]
    while todo:
        e = todo.pop()
        if e is not None and all(e is not seen for seen in out):
            out.append(e)
            todo += [e.__cause__, e.__context__]
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["url", "https-url", "header"])
def test_an_http_error_chains_nothing_that_holds_the_url_credentials_or_authorization(where):
    """No aiohttp exception (its ``request_info`` holds the URL and the Authorization header)
    is chained, hidden or not: tracebacks, loggers and error reporters see no secret."""
    pytest.importorskip("aiohttp")
    server, raw, closed = FaultServer(), RawServer({"garbage": b"garbage\r\n\r\n"}), socket.socket()
    closed.bind(("127.0.0.1", 0))
    scheme, cred = ("https" if where == "https-url" else "http"), ("" if where == "header" else "user:secret@")
    paths = [(server.port, "/status/404"), (server.port, "/status/500"), (server.port, "/reset/r?fails=9"),
             (server.port, "/loop"), (server.port, "/slow/s?s=2"), (closed.getsockname()[1], "/x"),
             (raw.port, "/garbage"), (server.port, "/big?size=100000"), (server.port, "/goto/g?to=http://[bad")]
    urls = [f"{scheme}://{cred}127.0.0.1:{port}{path}" for port, path in paths] + [f"{scheme}://{cred}a..b/x"]
    headers = {"Authorization": "Bearer secret"} if where == "header" else None
    retry = Retry(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02, attempt_timeout_s=0.5)
    try:
        out = fetch_each(HttpDataset(urls, headers=headers, retry=retry, max_bytes=1000))
    finally:
        closed.close()
        raw.close()
        server.close()
    basic = base64.b64encode(b"user:secret").decode()
    for url, exc in zip(urls, out):
        assert isinstance(exc, (OSError, ValueError)), (url, repr(exc))
        text = "".join(traceback.format_exception(exc))
        assert "secret" not in text and basic not in text, (url, text)
        chain = whole_chain(exc)
        assert len(chain) == 1, (url, [repr(e) for e in chain])
        held = repr(vars(exc))
        assert "secret" not in held and basic not in held, (url, held)


def test_url_credentials_with_an_authorization_header_fail_the_item_naming_the_url_masked():
    pytest.importorskip("aiohttp")
    ds = HttpDataset(["http://user:secret@127.0.0.1:1/x?token=TOKSECRET"], headers={"authorization": "Bearer b"})
    (exc,) = fetch_each(ds)
    assert isinstance(exc, ValueError) and "http://***@127.0.0.1:1/x?token=***: has credentials" in str(exc)
    assert "Authorization" in str(exc) and whole_chain(exc) == [exc]


@pytest.mark.timeout(60)
def test_a_total_time_out_and_a_failed_batch_through_the_loader_show_no_credentials(server):
    ds = HttpDataset([secret_url(server.port, "/slow/t?s=2")], retry=Retry(attempt_timeout_s=None), timeout_s=0.2)
    (exc,) = fetch_each(ds)
    assert isinstance(exc, TimeoutError) and "timeout_s=0.2" in str(exc)
    assert_clean(exc)
    with DataLoader(HttpDataset([secret_url(server.port, "/status/404")], retry=FAST), batch_size=None) as loader:
        with pytest.raises(FileNotFoundError) as info:
            next(iter(loader))
    assert_clean(info.value)
    assert info.value.filename == shown_url(server.port, "/status/404")


@pytest.mark.parametrize(("location", "match"), [
    ("ftp://alice:hunter2@h/x?token=TOKSECRET", "not an http"),
    ("http://alice:hunter2@[::1/x?token=TOKSECRET", "not a valid URL"),
    ("http://alice:hunter2@h/a/../x?token=TOKSECRET", "component"),
    # no scheme:// (a mistyped URL): shown as a path, password included
    ("alice:hunter2@h/x?token=TOKSECRET", "location '\\*\\*\\*@h/x\\?token=\\*\\*\\*' is not an http"),
    ("//alice:hunter2@h/x", "not an http"),
    ("https:/alice:hunter2@h/x", "not an http"),
    ("https//alice:hunter2@h/x", "not an http"),
    ("https:\\\\alice:hunter2@h/x", "not an http"),
    ("alice:hunter2@h/a/../x", "component"),
])
def test_refused_locations_are_named_without_credentials(location, match):
    with pytest.raises(ValueError, match=match) as info:
        HttpDataset([location])
    assert_clean(info.value)
    ds = HttpDataset(Locations(lambda i: location, length=1))  # the same, found when the item is made
    with pytest.raises(ValueError, match=match) as info:
        asyncio.run(ds[0])
    assert_clean(info.value)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: Template("https://alice:hunter2@h/{nope}?sig=AZSECRET"), "has no value"),
    (lambda: Template("https://alice:hunter2@h/{0}?sig=AZSECRET"), "must be a name"),
    (lambda: Template("https://alice:hunter2@h/x?sig=AZSECRET", v=1), "does not use"),
    (lambda: HttpDataset(Locations(Template("https://alice:hunter2@{h}/x", h="a"), length=1)), "may only follow"),
])
def test_refused_url_templates_are_named_without_credentials(make, match):
    with pytest.raises((ValueError, TypeError), match=match) as info:
        make()
    assert_clean(info.value)
    assert "https://***@h" in str(info.value) or "https://***@{h}" in str(info.value)


@pytest.mark.parametrize("host", ["127.0.0.1:99999", "a..b", "x" * 70 + ".invalid"])
def test_an_invalid_url_fails_its_item_with_valueerror_naming_it_masked(host):
    pytest.importorskip("aiohttp")
    (exc,) = fetch_each(HttpDataset([f"http://alice:hunter2@{host}/x?token=TOKSECRET"], retry=FAST))
    assert isinstance(exc, ValueError) and "invalid URL" in str(exc) and f"http://***@{host}/x?token=***" in str(exc)
    assert_clean(exc)


# -- ObjectStoreDataset -------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_object_store_errors_and_repr_show_no_credentials(server):
    pytest.importorskip("obstore")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    try:
        for port, key, kind in ((server.port, "status/404", FileNotFoundError),
                                (server.port, "status/500", OSError),
                                (closed.getsockname()[1], "k", OSError)):
            url = f"http://alice:hunter2@127.0.0.1:{port}/base?{QUERY}"
            ds = ObjectStoreDataset([key], url=url, retry=FAST, client_options={"allow_http": True})
            assert repr(ds).endswith(f"url='http://***@127.0.0.1:{port}/base?{SHOWN_QUERY}', max_bytes=None)")
            (exc,) = fetch_each(ds)
            assert isinstance(exc, kind), (key, repr(exc))
            assert_clean(exc)
            assert f"http://***@127.0.0.1:{port}/base/{key}?{SHOWN_QUERY}" in str(exc)  # the key, then the query
        with pytest.raises(ValueError, match="not a valid URL") as info:
            ObjectStoreDataset(["s3://alice:hunter2@[bkt/key?token=TOKSECRET"])
        assert_clean(info.value)
    finally:
        closed.close()


def test_file_paths_are_shown_as_they_are(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        FileDataset([str(tmp_path / "user:pw@x?token=t")])[0]
    assert info.value.filename.endswith("user:pw@x?token=t")  # a path: nothing to mask
