#include "ctest.h"

// nops counts the runs of the nop steps below, for benchmarks to check
// that they ran (atomically: flows of several loops may run them at once).
static unsigned long nops;

unsigned long ctest_nops(void)
{
    return __atomic_load_n(&nops, __ATOMIC_RELAXED);
}

static void nop(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
    __atomic_add_fetch(&nops, 1, __ATOMIC_RELAXED);
}

static void nop_success(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    __atomic_add_fetch(&nops, 1, __ATOMIC_RELAXED);
    bsi->api->success(bsi, 0);
}

// ctest_add_nop adds a C step that does nothing: it succeeds implicitly.
void ctest_add_nop(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, 0, nop, 0);
}

// ctest_add_nop_success adds a C step that calls success.
void ctest_add_nop_success(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, 0, nop_success, 0);
}

// ctest_add_nops adds n C steps that do nothing.
void ctest_add_nops(FutoInAsyncSteps* bsi, int n)
{
    for (int i = 0; i < n; i++) {
        bsi->api->add(bsi, 0, nop, 0);
    }
}

// ctest_nop does nothing: the cost of a call from Go into C.
void ctest_nop(void)
{
}

// ctest_callback calls back into an empty Go function: a call from Go into
// C that calls into Go.
void ctest_callback(void)
{
    ctestGoNop();
}
