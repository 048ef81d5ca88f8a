// A custom object lent to a C step, passed to success by C code that
// stepvm runs while the step's call runs: a cancel handler of a root the
// step cancels, the allocate function of a state variable, the cleanup of
// stack memory as the step's success ends its frame. nest_cleanups counts
// the object's cleanups.

#include <stdlib.h>
#include <string.h>

#include "ctest.h"

enum { NEST_CANCEL, NEST_ALLOC, NEST_STACK };

static int nest_cleanups;

static void nest_count(FutoInBinaryValue* v)
{
    (void)v;
    nest_cleanups++;
}

static const FutoInType nest_obj = {FTN_TYPE_CUSTOM_OBJECT, nest_count};

static FutoInAsyncSteps* nest_through; // the lending step's record, for its table
static FutoInAsyncSteps* nest_target;  // what the nested call completes: a waiting step, or NULL
static FutoInAsyncSteps* nest_other;   // the root the lending step cancels
static const FutoInArgs* nest_lent;    // the lending step's values, while its call runs

// nest_pass passes the values lent to the running step to success.
static void nest_pass(void)
{
    if (!nest_lent) {
        ctest_say("no lending call runs");
        return;
    }
    FutoInArgs out = *nest_lent;
    nest_through->api->success(nest_target, &out);
}

static void nest_emit(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &nest_obj;
    out.arg0.custom_data = (void*)(intptr_t)9;
    bsi->api->success(bsi, &out);
}

static void* nest_alloc(void* data)
{
    (void)data;
    nest_pass();
    return calloc(1, 1);
}

static void nest_free(void* data, void* value)
{
    (void)data;
    free(value);
}

static void nest_stack_cleanup(void* value)
{
    (void)value;
    nest_pass();
}

static void nest_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    FutoInArgs none;
    memset(&none, 0, sizeof(none));
    nest_through = bsi;
    nest_lent = args;
    switch ((int)(intptr_t)data) {
    case NEST_CANCEL:
        nest_other->api->cancel(nest_other);
        break;
    case NEST_ALLOC:
        bsi->api->stateVariable(bsi, NULL, "nest", nest_alloc, nest_free);
        break;
    case NEST_STACK:
        bsi->api->stack(bsi, 8, nest_stack_cleanup);
        bsi->api->success(bsi, &none);
        break;
    }
    nest_lent = NULL;
}

void ctest_add_nest(FutoInAsyncSteps* bsi, int mode, FutoInAsyncSteps* other, FutoInAsyncSteps* target)
{
    nest_other = other;
    nest_target = target;
    bsi->api->add(bsi, NULL, nest_emit, NULL);
    bsi->api->add(bsi, (void*)(intptr_t)mode, nest_step, NULL);
}

static void nest_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    nest_pass();
}

static void nest_wait_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->setCancel(bsi, NULL, nest_cancel);
    bsi->api->waitExternal(bsi);
}

void ctest_add_nest_wait(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, NULL, nest_wait_step, NULL);
}

int ctest_nest_cleanups(void)
{
    return nest_cleanups;
}
