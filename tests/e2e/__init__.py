"""Browser tests: headless Chromium drives a real `desk run` server."""
