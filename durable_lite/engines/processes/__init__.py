"""The process plumbing every engine's workers share.

    forked    fork-server processes many threads may start and watch (exit statuses)
    watchdog  what outlives a killed kernel: ends its servers and workers, deletes their
              folders
"""
