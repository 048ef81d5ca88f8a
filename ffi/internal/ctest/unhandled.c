// The handler of unhandled errors that execute gave, run nested in a C
// step of another flow: that step completes a waiting step of the failing
// flow with handle_error through its record, and the failing flow's end
// runs the handler before handle_error returns. The handler then makes one
// call (what) through one record (through): its own, the caller's (a
// step, or an error handler, that is running) or the failed step's, which
// has ended.

#include <stdint.h>
#include <string.h>

#include "ctest.h"

enum {
    U_OWN = 0,    // the record the handler receives: the failed flow's root
    U_CALLER = 1, // the record of the C function that made the flow fail
    U_ENDED = 2,  // the record of the failed step, which has ended
};

static FutoInAsyncSteps* u_root;    // the failing flow's root
static FutoInAsyncSteps* u_waiting; // its step that waits
static FutoInAsyncSteps* u_caller;  // the C function that fails it
static int u_through, u_what;

static void u_nop(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
}

static void u_retry_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    ctest_sayf("retry unhandled: %s", code);
}

static void u_act(FutoInAsyncSteps* bsi)
{
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    switch (u_what) {
    case 1:
        bsi->api->success(bsi, &out);
        break;
    case 2:
        bsi->api->add(bsi, NULL, u_nop, NULL);
        break;
    case 3:
        bsi->api->handle_error(bsi, "Reentry", "from the handler of unhandled errors");
        break;
    case 4:
        bsi->api->execute(bsi, NULL, u_retry_handler);
        break;
    case 5:
        bsi->api->cancel(bsi);
        break;
    case 6:
        bsi->api->setTimeout(bsi, 5);
        break;
    case 7:
        bsi->api->waitExternal(bsi);
        break;
    case 8:
        bsi->api->breakLoop(bsi, NULL);
        break;
    case 9:
        bsi->api->continueLoop(bsi, NULL);
        break;
    case 10:
        bsi->api->free(bsi);
        break;
    }
}

static void u_unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("unhandled: %s", code);
    switch (u_through) {
    case U_OWN:
        u_act(bsi);
        break;
    case U_CALLER:
        u_act(u_caller);
        break;
    case U_ENDED:
        u_act(u_waiting);
        break;
    }
}

static void u_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    u_waiting = bsi;
    bsi->api->waitExternal(bsi);
}

static void u_fail_waiting(FutoInAsyncSteps* bsi)
{
    u_caller = bsi;
    u_waiting->api->handle_error(u_waiting, "Nested", NULL);
    ctest_say("caller returns");
}

static void u_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    if (data) {
        bsi->api->handle_error(bsi, "Outer", NULL);
        return;
    }
    u_fail_waiting(bsi);
}

static void u_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    (void)code;
    u_fail_waiting(bsi);
}

// ctest_unhandled_nested adds to failing a C step that waits and executes
// it with the handler above; it adds to caller the C step that fails the
// waiting one, from its own function or (in_error) from its error handler,
// once caller runs.
void ctest_unhandled_nested(FutoInAsyncSteps* failing, FutoInAsyncSteps* caller,
        int in_error, int through, int what)
{
    u_root = failing;
    u_waiting = NULL;
    u_caller = NULL;
    u_through = through;
    u_what = what;
    failing->api->add(failing, NULL, u_wait, NULL);
    failing->api->execute(failing, NULL, u_unhandled);
    caller->api->add(caller, (void*)(intptr_t)in_error, u_step, in_error ? u_error : NULL);
}
