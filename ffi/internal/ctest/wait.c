#include <stdint.h>
#include <string.h>

#include "ctest.h"

// A C step that waits for an external event, as one that started I/O
// would: C keeps its record to complete it later.

static FutoInAsyncSteps* waiting;
static int cancels;

static void wait_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    cancels++;
}

static void wait_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->waitExternal(bsi);
    if (data) {
        bsi->api->setCancel(bsi, NULL, wait_cancel);
    }
    waiting = bsi;
}

// ctest_add_wait adds a C step that waits, with a cancel handler if
// cancel is set; ctest_waiting returns the record of the last one that ran.
void ctest_add_wait(FutoInAsyncSteps* bsi, int cancel)
{
    bsi->api->add(bsi, (void*)(intptr_t)cancel, wait_step, NULL);
}

FutoInAsyncSteps* ctest_waiting(void) { return waiting; }

int ctest_wait_cancels(void) { return cancels; }

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
