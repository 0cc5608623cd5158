"""A spider for the crawl child's tests: its one item names the value of CRAWL_TEST_MARK in the
child's environment, so a test sees the environment the crawl really ran with."""

from __future__ import annotations

import os
from typing import Any, AsyncIterator

import scrapy


class EnvironmentSpider(scrapy.Spider):
    name = "environment"

    def __init__(self, start_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request(self.start_url, callback=self.parse)

    def parse(self, response: Any, **kwargs: Any) -> Any:
        yield {"name": os.environ.get("CRAWL_TEST_MARK", "(unset)")}
