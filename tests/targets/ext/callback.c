/* A C library that calls back into Python through a ctypes CFUNCTYPE:
 * built by tests/integration/test_native.py without unwind tables
 * (-fno-asynchronous-unwind-tables) and with frame pointers, so that an
 * unwinder gets past these frames only by the frame-pointer fallback,
 * as gdb's does. */
typedef int (*callback_fn)(int);

__attribute__((noinline)) int callback_apply(callback_fn fn, int x)
{
    int r = fn(x);
    return r + 1;
}

__attribute__((noinline)) int callback_twice(callback_fn fn, int x)
{
    int r = callback_apply(fn, x);
    return r * 2;
}
