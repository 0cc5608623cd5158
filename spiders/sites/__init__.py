"""Scrapy spiders, one module per pricing page. They run inside `python -m spiders.runner`."""
