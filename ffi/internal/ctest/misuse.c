// Bad input from C, one scenario per id. Each C step misuses the interface
// once and then does what a careless C function would: it carries on.

#include <string.h>

#include "ctest.h"

static FutoInAsyncSteps* saved;

static void nop_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
}

static void fake_add(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_execute_callback f,
        FutoInAsyncSteps_error_callback eh)
{
    (void)bsi;
    (void)data;
    (void)f;
    (void)eh;
}

static const FutoInAsyncStepsAPI fake_api = {{{.add = fake_add}}};
static FutoInAsyncSteps fake = {&fake_api};

static void say_late(void* data)
{
    (void)data;
    ctest_say("a canceled callback ran");
}

static void misuse_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    static const FutoInType bad_type = {0x3F, NULL};
    static const FutoInType str_type = {FTN_TYPE_STRING, NULL};
    static const FutoInType arr_type = {FTN_TYPE_ARRAY | FTN_TYPE_INT32, NULL};
    static const FutoInType str_arr_type = {FTN_TYPE_ARRAY | FTN_TYPE_STRING, NULL};
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    FutoInAsyncSteps* r;

    switch ((int)(intptr_t)data) {
    case 1: // NULL bsi
        bsi->api->add(NULL, NULL, nop_step, NULL);
        break;
    case 2: // NULL step function
        bsi->api->add(bsi, NULL, NULL, NULL);
        break;
    case 3: // unknown type tag
        out.arg0.type = &bad_type;
        bsi->api->success(bsi, &out);
        break;
    case 4: // string length beyond its data
        out.arg1.type = &str_type;
        out.arg1.cstr = "abc";
        out.arg1.length = 10;
        bsi->api->success(bsi, &out);
        break;
    case 5: // the handle of a step that has ended (saved by the previous step)
        saved->api->success(saved, NULL);
        break;
    case 6: // a freed root
        r = bsi->api->newInstance(bsi);
        r->api->free(r);
        r->api->add(r, NULL, nop_step, NULL);
        break;
    case 7: // success after add
        bsi->api->add(bsi, NULL, nop_step, NULL);
        bsi->api->success(bsi, NULL);
        break;
    case 8: // calls after handle_error are ignored
        bsi->api->handle_error(bsi, "First", "the first error");
        bsi->api->handle_error(bsi, "Second", "never raised");
        bsi->api->success(bsi, NULL);
        break;
    case 9: // a FutoInAsyncSteps of another implementation
        bsi->api->add(&fake, NULL, nop_step, NULL);
        break;
    case 10: // NULL loop body
        bsi->api->loop(bsi, NULL, NULL, NULL);
        break;
    case 11: // break outside of a loop
        bsi->api->breakLoop(bsi, NULL);
        break;
    case 12: // an accessor of a step that has ended (saved by the previous step)
        saved->api->add(saved, NULL, nop_step, NULL);
        break;
    case 13: // NULL array with a length
        out.arg0.type = &arr_type;
        out.arg0.p = NULL;
        out.arg0.length = 5;
        bsi->api->success(bsi, &out);
        break;
    case 14: // array of strings: not a type of the interface
        out.arg0.type = &str_arr_type;
        bsi->api->success(bsi, &out);
        break;
    case 15: // NULL cancel handler
        bsi->api->setCancel(bsi, NULL, NULL);
        break;
    case 16: // handle_error with a NULL code
        bsi->api->handle_error(bsi, NULL, NULL);
        break;
    case 17: // success twice
        bsi->api->success(bsi, NULL);
        bsi->api->success(bsi, NULL);
        break;
    case 18: // execute on a step
        bsi->api->execute(bsi, NULL, NULL);
        break;
    case 19: // addSync with a NULL FutoInSync
        bsi->api->addSync(bsi, NULL, NULL, nop_step, NULL);
        break;
    case 20: // stateVariable with a NULL allocate function
        bsi->api->stateVariable(bsi, NULL, "v", NULL, NULL);
        break;
    case 21: // sched_immediate with a NULL callback
        bsi->api->sched_immediate(bsi, NULL, NULL);
        break;
    case 22: // repeat with a NULL body
        bsi->api->repeat(bsi, NULL, 3, NULL, NULL);
        break;
    case 23: // free after handle_error: carried out all the same
        r = bsi->api->newInstance(bsi);
        bsi->api->handle_error(bsi, "First", "the first error");
        r->api->free(r);
        ctest_sayf("freed after the error: valid %d", r->api->isValid(r));
        break;
    case 25: // a type pointer that is an integer, after a good value
        out.arg0.type = &str_type;
        out.arg0.cstr = "abc";
        out.arg1.type = (const FutoInType*)(uintptr_t)0x10;
        bsi->api->success(bsi, &out);
        break;
    case 26: // the same, refused: through the handle of a step that has ended
        bsi->api->success(bsi, NULL);
        out.arg2.type = (const FutoInType*)(uintptr_t)0x10;
        bsi->api->success(bsi, &out);
        break;
    case 24: { // sched_cancel after handle_error: carried out all the same
        FutoInHandle h = bsi->api->sched_deferred(bsi, 1, NULL, say_late);
        bsi->api->handle_error(bsi, "First", "the first error");
        bsi->api->sched_cancel(bsi, &h);
        ctest_sayf("canceled after the error: valid %d", bsi->api->sched_is_valid(bsi, &h));
        break;
    }
    }
}

// Calls through cross_other, a record of another loop. Mode 0 schedules a
// deferred callback through the step's own record and asks after it and
// cancels it through cross_other; mode 1 adds a step through cross_other.
static FutoInAsyncSteps* cross_other;

static void cross_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    FutoInHandle h, copy;
    switch ((int)(intptr_t)data) {
    case 0:
        h = bsi->api->sched_deferred(bsi, 1, NULL, say_late);
        copy = h;
        ctest_sayf("valid through the other record %d", cross_other->api->sched_is_valid(cross_other, &h));
        cross_other->api->sched_cancel(cross_other, &h);
        ctest_sayf("canceled through the other record: valid %d", bsi->api->sched_is_valid(bsi, &copy));
        break;
    case 1:
        cross_other->api->add(cross_other, NULL, nop_step, NULL);
        ctest_say("added through the other record");
        break;
    }
}

void ctest_add_cross(FutoInAsyncSteps* bsi, int mode, FutoInAsyncSteps* other)
{
    cross_other = other;
    bsi->api->add(bsi, (void*)(intptr_t)mode, cross_step, NULL);
}

static void save_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    if ((int)(intptr_t)data == 12) {
        saved = bsi->api->parallel(bsi, NULL, NULL);
        saved->api->add(saved, NULL, nop_step, NULL);
        return;
    }
    saved = bsi;
}

// ctest_misuse adds to root the steps of a scenario, with gap C steps
// between the one that saves a handle and the one that misuses it.
void ctest_misuse(FutoInAsyncSteps* root, int scenario, int gap)
{
    if (scenario == 5 || scenario == 12) {
        root->api->add(root, (void*)(intptr_t)scenario, save_step, NULL);
    }
    for (int i = 0; i < gap; i++) {
        root->api->add(root, NULL, nop_step, NULL);
    }
    root->api->add(root, (void*)(intptr_t)scenario, misuse_step, NULL);
}

// ctest_misuse_outside misuses the interface from C code that Go calls
// directly, outside any step.
void ctest_misuse_outside(FutoInAsyncSteps* root, int scenario)
{
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    switch (scenario) {
    case 1:
        root->api->add(NULL, NULL, nop_step, NULL);
        break;
    case 2:
        root->api->add(root, NULL, NULL, NULL);
        break;
    case 3:
        root->api->success(root, &out);
        break;
    case 4:
        root->api->breakLoop(root, NULL);
        break;
    case 5:
        root->api->add(&fake, NULL, nop_step, NULL);
        break;
    case 6:
        root->api->handle_error(root, "Direct", "from C");
        break;
    case 7:
        root->api->continueLoop(root, NULL);
        break;
    }
}
