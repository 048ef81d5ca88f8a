// A second execute of a running root, as C code that lost track of it
// would make.

#include "ctest.h"

// Its handler of unhandled errors prints "refused execute's handler: <code>".
static void refused_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    ctest_sayf("refused execute's handler: %s", code);
}

static void execute_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    ctest_execute_refused((FutoInAsyncSteps*)data);
}

void ctest_execute_refused(FutoInAsyncSteps* target)
{
    target->api->execute(target, NULL, refused_handler);
}

// ctest_add_execute adds to bsi a C step that executes target so.
void ctest_add_execute(FutoInAsyncSteps* bsi, FutoInAsyncSteps* target)
{
    bsi->api->add(bsi, target, execute_step, NULL);
}
