// Calls into stepvm from C code called back in unusual places: each
// scenario makes one call (what) from one kind of callback (where), on a
// root that C made with newInstance.

#include <stdlib.h>
#include <string.h>

#include "ctest.h"

enum {
    W_STEP = 1,  // the step itself, for reference
    W_CANCEL,    // a cancel handler (the root is canceled)
    W_ERROR,     // an error handler
    W_STACK,     // the cleanup of stack memory, as its step ends
    W_STATE,     // the cleanup of a state variable, as the root is freed
    W_SCHED,     // a sched_immediate callback, while the step waits
    W_UNHANDLED, // the handler of unhandled errors execute was given
    W_OBJECT,    // the cleanup of a custom object lent to a C step
    W_COUNT
};

static FutoInAsyncSteps* r_root; // the scenario's root
static int r_what;
static int r_runaway; // stack cleanups run by the scenario that allocates in them

static void nop(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
}

static void nop_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
}

static void sched_nop(void* data)
{
    (void)data;
}

static void* alloc_int(void* data)
{
    (void)data;
    return calloc(1, sizeof(int));
}

static void free_value(void* data, void* value)
{
    (void)data;
    free(value);
}

static void break_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    bsi->api->breakLoop(bsi, NULL);
}

static void act(FutoInAsyncSteps* bsi);

// stack_act runs the scenario's call through the record its memory holds.
static void stack_act(void* v)
{
    if (++r_runaway > 1000) {
        return;
    }
    act(*(FutoInAsyncSteps**)v);
}

static void act(FutoInAsyncSteps* bsi)
{
    static const FutoInType int_type = {FTN_TYPE_INT32, NULL};
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    FutoInAsyncSteps* r;
    FutoInAsyncSteps** p;
    switch (r_what) {
    case 1:
        out.arg0.type = &int_type;
        out.arg0.i32 = 42;
        bsi->api->success(bsi, &out);
        break;
    case 2:
        bsi->api->add(bsi, NULL, nop, NULL);
        break;
    case 3:
        bsi->api->handle_error(bsi, "Reentry", "from a callback");
        break;
    case 4: // stack memory whose cleanup makes this call again
        p = (FutoInAsyncSteps**)bsi->api->stack(bsi, sizeof(*p), stack_act);
        if (p) {
            *p = bsi;
        }
        break;
    case 5:
        bsi->api->stateVariable(bsi, NULL, "reentry", alloc_int, free_value);
        break;
    case 6:
        r_root->api->execute(r_root, NULL, NULL);
        break;
    case 7:
        r_root->api->cancel(r_root);
        break;
    case 8:
        r_root->api->free(r_root);
        break;
    case 9:
        r = bsi->api->newInstance(bsi);
        if (r) {
            r->api->free(r);
        }
        break;
    case 10:
        r = bsi->api->parallel(bsi, NULL, NULL);
        if (r) {
            r->api->add(r, NULL, nop, NULL);
        }
        break;
    case 11:
        bsi->api->setTimeout(bsi, 5);
        break;
    case 12:
        bsi->api->setCancel(bsi, NULL, nop_cancel);
        break;
    case 13:
        bsi->api->waitExternal(bsi);
        break;
    case 14:
        bsi->api->loop(bsi, NULL, break_body, NULL);
        break;
    case 15:
        bsi->api->breakLoop(bsi, NULL);
        break;
    case 16:
        bsi->api->sched_immediate(bsi, NULL, sched_nop);
        bsi->api->sched_deferred(bsi, 5, NULL, sched_nop);
        break;
    case 17:
        r_root->api->add(r_root, NULL, nop, NULL);
        break;
    case 18:
        bsi->api->rootId(bsi);
        bsi->api->isValid(bsi);
        bsi->api->is_same_thread(bsi);
        break;
    }
}

static void cancel_act(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    act(bsi);
}

static void error_act(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    (void)code;
    act(bsi);
}

static void state_act(void* data, void* value)
{
    (void)data;
    free(value);
    act(r_root);
}

static void sched_act(void* data)
{
    act((FutoInAsyncSteps*)data);
}

static FutoInAsyncSteps* r_receiver; // the C step an object is lent to

static void object_act(FutoInBinaryValue* v)
{
    (void)v;
    act(r_receiver);
}

static void step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    static const FutoInType obj_type = {FTN_TYPE_CUSTOM_OBJECT, object_act};
    FutoInArgs out;
    FutoInAsyncSteps** p;
    (void)args;
    switch ((int)(intptr_t)data) {
    case W_STEP:
        act(bsi);
        break;
    case W_CANCEL:
        bsi->api->setCancel(bsi, NULL, cancel_act);
        break;
    case W_ERROR:
        bsi->api->handle_error(bsi, "Boom", NULL);
        break;
    case W_STACK:
        p = (FutoInAsyncSteps**)bsi->api->stack(bsi, sizeof(*p), stack_act);
        *p = bsi;
        break;
    case W_STATE:
        bsi->api->stateVariable(bsi, NULL, "acts", alloc_int, state_act);
        break;
    case W_SCHED:
        bsi->api->sched_immediate(bsi, bsi, sched_act);
        bsi->api->waitExternal(bsi);
        break;
    case W_UNHANDLED:
        bsi->api->handle_error(bsi, "Boom", NULL);
        break;
    case W_OBJECT:
        memset(&out, 0, sizeof(out));
        out.arg0.type = &obj_type;
        bsi->api->success(bsi, &out);
        break;
    }
}

static void receive(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    r_receiver = bsi; // the object's cleanup runs as this step returns
}

static void unhandled_act(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("unhandled: %s", code);
    act(bsi);
}

// ctest_reentry makes a root with newInstance through host and adds the
// steps of scenario (where, what) to it; ctest_reentry_execute executes
// it. The root is C's until ctest_reentry_free.
FutoInAsyncSteps* ctest_reentry(FutoInAsyncSteps* host, int where, int what)
{
    r_root = host->api->newInstance(host);
    r_what = what;
    r_runaway = 0;
    r_receiver = NULL;
    r_root->api->add(r_root, (void*)(intptr_t)where, step, where == W_ERROR ? error_act : NULL);
    if (where == W_OBJECT) {
        r_root->api->add(r_root, NULL, receive, NULL);
    }
    return r_root;
}

void ctest_reentry_execute(void)
{
    r_root->api->execute(r_root, NULL, unhandled_act);
}

void ctest_reentry_free(void)
{
    r_root->api->free(r_root);
}

int ctest_reentry_runaway(void)
{
    return r_runaway;
}
