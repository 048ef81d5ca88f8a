#include <string.h>

#include "ctest.h"

// A C step that waits for an external event, as one that started I/O
// would: C keeps its record to complete it later.

static FutoInAsyncSteps* waiting;

static void wait_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->waitExternal(bsi);
    waiting = bsi;
}

void ctest_add_wait(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, NULL, wait_step, NULL);
}

FutoInAsyncSteps* ctest_waiting(void) { return waiting; }

// ctest_complete completes the step of bsi with success and one string,
// as a C event callback would.
void ctest_complete(FutoInAsyncSteps* bsi, const char* s)
{
    static const FutoInType str_type = {FTN_TYPE_STRING, NULL};
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &str_type;
    out.arg0.cstr = s;
    out.arg0.length = 0;
    bsi->api->success(bsi, &out);
}
