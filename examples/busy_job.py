"""A small batch job that does real work for a few seconds: it makes
orders, writes and reads them as JSON, checks their e-mail addresses with a
regular expression, and sums them up per city.  `pyunwind sample --
python3 examples/busy_job.py` profiles it (scripts/demo does).

    python3 busy_job.py [SECONDS]    (default 5)
"""

import json
import random
import re
import statistics
import sys
import time

CITIES = ["Lisbon", "Oslo", "Quito", "Hanoi", "Perth", "Accra", "Lima"]
NAMES = ["ana", "bo", "chen", "dara", "eli", "femi", "gus", "hana", "ivo"]
EMAIL = re.compile(r"^[a-z]+\.[a-z]+@(?:example|test)\.(?:com|org)$")


def make_orders(rng, n):
    orders = []
    for i in range(n):
        first, last = rng.choice(NAMES), rng.choice(NAMES)
        domain = rng.choice(["example.com", "test.org", "example.net"])
        orders.append({
            "id": i,
            "email": "%s.%s@%s" % (first, last, domain),
            "city": rng.choice(CITIES),
            "items": [round(rng.uniform(1, 90), 2)
                      for _ in range(rng.randint(1, 6))],
        })
    return orders


def write(orders):
    return [json.dumps(order, sort_keys=True) for order in orders]


def read(lines):
    return [json.loads(line) for line in lines]


def valid(orders):
    return [order for order in orders if EMAIL.match(order["email"])]


def per_city(orders):
    totals = {}
    for order in orders:
        totals.setdefault(order["city"], []).append(sum(order["items"]))
    return {city: (len(t), statistics.fmean(t), statistics.pstdev(t))
            for city, t in totals.items()}


def report(summary):
    return "\n".join("%-8s %5d %8.2f %8.2f" % (city, *summary[city])
                     for city in sorted(summary))


def batch(rng):
    orders = read(write(make_orders(rng, 2000)))
    return report(per_city(valid(orders)))


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    rng = random.Random(7)
    print("working", flush=True)
    end = time.monotonic() + seconds
    batches = 0
    while time.monotonic() < end:
        text = batch(rng)
        batches += 1
    print("%d batches; the last:\n%s" % (batches, text), flush=True)


if __name__ == "__main__":
    main()
