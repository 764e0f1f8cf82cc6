"""ctxwise as a service (extra ``server``): a provider-compatible proxy, a REST API
over the Engine, API keys per tenant, and each tenant's data in a partition of its
own (:mod:`ctxwise.tenancy`).

Importing this package needs nothing beyond the default install; the ASGI app
itself (:mod:`ctxwise.server.app`) needs the ``server`` extra.
"""

__all__: list[str] = []
