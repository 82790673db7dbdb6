"""An order being totalled when the program hangs: `pyunwind dump --locals
PID` shows each frame's arguments and variables (docs/dump.md)."""

import time


class Order:
    def __init__(self, number, lines):
        self.number = number
        self.lines = lines


def total(order, rates, currency="EUR"):
    subtotal = sum(price * count for _, price, count in order.lines)
    rate = rates[currency]
    print("stuck", flush=True)
    time.sleep(3600)  # stuck here
    return subtotal * rate


def process(queue):
    done = []
    for order in queue:
        done.append(total(order, {"EUR": 1.0, "USD": 1.08}, currency="USD"))
    return done


process([Order(17, [("pen", 1.5, 4), ("ink", 12.0, 1)])])
