"""One address for every caller: bearer keys, the key store, and the choice of the serving Region.

`keys` (pure) makes and checks the keys callers send as `Authorization: Bearer <key>`; `key_store`
keeps their hashed records in a DynamoDB table (a global table in AWS, the moto server locally);
`routing` (pure) decides, from an endpoint's record, which Regions may answer a request and in which
order. The AWS authorizer (`lambdas/`), the local global address (`gco.local.front`) and the CLI
build on them; `docs/global.md` is the design.
"""
