"""Thin Prefect tasks over dprelease library calls.

`NO_PERSISTENCE` is the option set of every task: no result persistence, no caching, no
automatic retries (a retry of a task that touched the real data would be a new, unaccounted
spend; PRIVACY_MODEL.md section 7).
"""

from prefect.cache_policies import NO_CACHE

NO_PERSISTENCE = {"persist_result": False, "cache_policy": NO_CACHE, "retries": 0}
