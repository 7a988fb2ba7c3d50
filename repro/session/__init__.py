"""A plan executed: its runs trained here one after another, or handed to a launcher as jobs."""
