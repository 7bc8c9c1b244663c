"""Effect handlers: the sync and async drivers of the core flow, and the HTTP transport."""
