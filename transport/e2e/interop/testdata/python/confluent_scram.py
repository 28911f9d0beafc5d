"""SCRAM over SASL_SSL through confluent-kafka (librdkafka), for the interop
suite's security_test.go.

Usage: confluent_scram.py BOOTSTRAP OPERATION TOPIC, with WEIR_SASL_MECHANISM
(SCRAM-SHA-256 or SCRAM-SHA-512), WEIR_SASL_USER, WEIR_SASL_PASSWORD and
WEIR_SSL_CA (a PEM file) in the environment.

  scram          produce five records to partition 0, read them back as group TOPIC-g
  scram-refused  a producer with these credentials gets librdkafka's
                 authentication error (the broker's SASL_AUTHENTICATION_FAILED)
"""

import os
import sys

from confluent_kafka import Consumer, KafkaError, Producer

from common import check, deadline_loop, log

BOOTSTRAP, OP, TOPIC = sys.argv[1:4]
MECH = os.environ["WEIR_SASL_MECHANISM"]
SECURITY = {
    "bootstrap.servers": BOOTSTRAP,
    "security.protocol": "SASL_SSL",
    "ssl.ca.location": os.environ["WEIR_SSL_CA"],
    "sasl.mechanisms": MECH,
    "sasl.username": os.environ["WEIR_SASL_USER"],
    "sasl.password": os.environ["WEIR_SASL_PASSWORD"],
}


def scram():
    want = [f"{MECH}-{i}" for i in range(5)]
    p = Producer(SECURITY)
    for v in want:
        p.produce(TOPIC, v.encode(), partition=0)
    check(p.flush(30) == 0, "records not delivered within 30 s")
    c = Consumer({**SECURITY, "group.id": TOPIC + "-g", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got = []
    for _ in deadline_loop(f"reading {TOPIC}"):
        m = c.poll(0.5)
        if m is None:
            continue
        check(m.error() is None, f"consume: {m.error()}")
        got.append(m.value().decode())
        if len(got) >= len(want):
            c.commit(message=m, asynchronous=False)
            break
    c.close()
    check(got == want, f"consumed {got}, want {want}")


def scram_refused():
    errors = []
    p = Producer({**SECURITY, "error_cb": errors.append})
    for _ in deadline_loop("an authentication error"):
        p.poll(0.2)
        if errors:
            break
    log(f"refused: {errors[0]}")
    check(errors[0].code() == KafkaError._AUTHENTICATION, f"error {errors[0]}, want _AUTHENTICATION")


{"scram": scram, "scram-refused": scram_refused}[OP]()
log(f"confluent-kafka {OP}: ok")
