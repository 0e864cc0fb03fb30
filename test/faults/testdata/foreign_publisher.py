"""A foreign producer for TestFaultForeignMessagesWithoutID: another client,
not acemq's. It publishes N messages to QUEUE with confirms, each a JSON body
carrying a business key, with no x-acemq-id header and no message-id: only
the correlation id (the key again) that the test's accounting reads.

usage: foreign_publisher.py URL QUEUE PREFIX N
"""
import json
import sys

import pika

url, queue, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
conn = pika.BlockingConnection(pika.URLParameters(url))
ch = conn.channel()
ch.confirm_delivery()
for i in range(n):
    key = "%s-%04d" % (prefix, i)
    # basic_publish raises on a nack or a return: the test sees the exit.
    ch.basic_publish(
        exchange="",
        routing_key=queue,
        body=json.dumps({"id": key}),
        properties=pika.BasicProperties(
            content_type="application/json", delivery_mode=2, correlation_id=key),
        mandatory=True,
    )
conn.close()
print("published %d" % n)
