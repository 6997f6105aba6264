"""Static browser pages of a service (the dashboard, the review web) and their headers.

A page is an HTML file plus its script and style files, served from the service's own origin
under a strict Content-Security-Policy: no inline script, nothing loaded from elsewhere. The
pages show data that requests and bus messages shape (class names, error texts, run ids), so
even a renderer that got escaping wrong could not run what the data carries.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException, Response

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# every response a browser may render: no MIME sniffing, no referrer, no framing
BASE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
# stored files served as they are (a release's report.html, an .svg): rendered, if at all, in
# a sandbox with no script and no access to the origin's pages or APIs
SANDBOX_HEADERS = {**BASE_HEADERS, "Content-Security-Policy": "sandbox; default-src 'none'; img-src 'self'"}


def csp(img_src: str = "'self'", media_src: str = "'none'") -> str:
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            f"img-src {img_src}",
            f"media-src {media_src}",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


def mount_page(
    app: FastAPI,
    route: str,
    static_route: str,
    html: Path,
    assets: list[Path],
    img_src: str,
    media_src: str = "'none'",
) -> None:
    """Serve ``html`` at ``route`` and each asset at ``<static_route>/<name>``, read once at start."""
    # no-cache: an upgraded service must not pair a cached old page with a new script
    headers = {
        **BASE_HEADERS,
        "Content-Security-Policy": csp(img_src, media_src),
        "Cache-Control": "no-cache",
    }
    page = html.read_bytes()
    files = {p.name: (p.read_bytes(), MEDIA_TYPES[p.suffix]) for p in assets}

    @app.get(route, include_in_schema=False)
    async def serve_page() -> Response:
        return Response(page, media_type=MEDIA_TYPES[".html"], headers=headers)

    @app.get(f"{static_route}/{{name}}", include_in_schema=False)
    async def serve_asset(name: str) -> Response:
        if name not in files:
            raise HTTPException(404, "no such file")
        data, media_type = files[name]
        return Response(data, media_type=media_type, headers=headers)
