"""Scrapy spiders, one module per pricing page. They run inside `python -m gpuledger.spiders.runner`."""
