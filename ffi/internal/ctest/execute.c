// A second execute of a running root, as C code that lost track of it
// would make; a handler of unhandled errors that executes its root again.

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

// A handler of unhandled errors that retries once: it adds to its root a
// C step that fails with "Again" and executes the root again with itself
// and no data, which makes it only print the next time.

static void fail_again(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->handle_error(bsi, "Again", NULL);
}

static void retrying(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    ctest_sayf("unhandled: %s", code);
    if (data) {
        bsi->api->add(bsi, NULL, fail_again, NULL);
        bsi->api->execute(bsi, NULL, retrying);
    }
}

// ctest_execute_retrying executes root with that handler.
void ctest_execute_retrying(FutoInAsyncSteps* root)
{
    root->api->execute(root, (void*)1, retrying);
}
