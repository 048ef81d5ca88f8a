#include "ctest.h"

static void nop(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
}

static void nop_success(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
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
