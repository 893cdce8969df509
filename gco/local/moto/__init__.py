"""The moto server that stands in for DynamoDB with streams, S3 and Step Functions: the process that
starts and stops it (`motoserver`), its entry point, which serializes writes and installs the patches
(`moto_app`), and the patches that keep moto's CPU off the stream run: DynamoDB and streams calls
dispatched to moto's handlers directly (`moto_direct`), item and GetRecords answers written as JSON
once (`moto_json`), a condition parsed once per call (`moto_lexer`). It knows nothing of Regions,
clusters or the walk-through.
"""
