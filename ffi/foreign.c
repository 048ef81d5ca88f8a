// Calls from Go into a FutoInAsyncSteps implemented by foreign code, and the
// C functions such an engine calls to run Go code (see foreign.h). Each
// callback forwards to a Go function of foreign_calls.go, which recovers
// whatever the Go code raises: no panic crosses these frames.

#include "foreign.h"
#include "_cgo_export.h"

static void fx_exec(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    stepvmFxExec(bsi, (uintptr_t)data, (FutoInArgs*)args);
}

static void fx_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    stepvmFxError(bsi, (uintptr_t)data, (char*)code);
}

static void fx_cancel(FutoInAsyncSteps* bsi, void* data)
{
    stepvmFxCancel(bsi, (uintptr_t)data);
}

static void fx_loop(FutoInAsyncSteps* bsi, void* data)
{
    stepvmFxLoop(bsi, (uintptr_t)data, 0);
}

static void fx_repeat(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    stepvmFxLoop(bsi, (uintptr_t)data, i);
}

static void* fx_state_allocate(void* data)
{
    (void)data;
    return (void*)stepvmFxStateAllocate();
}

static void fx_state_cleanup(void* data, void* value)
{
    (void)data;
    stepvmFxRelease((uintptr_t)value);
}

static void fx_stack_cleanup(void* value)
{
    uintptr_t id = *(uintptr_t*)value;
    if (id) {
        stepvmFxStackCleanup(id, (char*)value + stepvm_fx_stack_header);
    }
}

static void fx_free_value(FutoInBinaryValue* v)
{
    free((void*)v->p);
}

static void fx_go_value_cleanup(FutoInBinaryValue* v)
{
    stepvmFxRelease((uintptr_t)v->custom_data);
}

const FutoInType stepvm_fx_string_type = {FTN_TYPE_STRING, fx_free_value};
const FutoInType stepvm_fx_bytes_type = {FTN_TYPE_ARRAY | FTN_TYPE_UINT8, fx_free_value};
const FutoInType stepvm_fx_go_type = {FTN_TYPE_CUSTOM_OBJECT, fx_go_value_cleanup};

void stepvm_fx_add(FutoInAsyncSteps* bsi, uintptr_t data, int with_eh)
{
    bsi->api->add(bsi, (void*)data, fx_exec, with_eh ? fx_error : NULL);
}

FutoInAsyncSteps* stepvm_fx_parallel(FutoInAsyncSteps* bsi, uintptr_t data, int with_eh)
{
    return bsi->api->parallel(bsi, (void*)data, with_eh ? fx_error : NULL);
}

uintptr_t stepvm_fx_state_variable(FutoInAsyncSteps* bsi, const char* name)
{
    return (uintptr_t)bsi->api->stateVariable(bsi, NULL, name, fx_state_allocate, fx_state_cleanup);
}

void* stepvm_fx_stack(FutoInAsyncSteps* bsi, size_t size, uintptr_t destroy)
{
    char* p = bsi->api->stack(bsi, size + stepvm_fx_stack_header, fx_stack_cleanup);
    if (!p) {
        return NULL;
    }
    memset(p, 0, size + stepvm_fx_stack_header);
    *(uintptr_t*)p = destroy;
    return p + stepvm_fx_stack_header;
}

void stepvm_fx_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    bsi->api->success(bsi, args);
}

void stepvm_fx_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    bsi->api->handle_error(bsi, code, info);
}

void stepvm_fx_set_timeout(FutoInAsyncSteps* bsi, uint32_t ms)
{
    bsi->api->setTimeout(bsi, ms);
}

void stepvm_fx_set_cancel(FutoInAsyncSteps* bsi, uintptr_t data)
{
    bsi->api->setCancel(bsi, (void*)data, fx_cancel);
}

void stepvm_fx_wait_external(FutoInAsyncSteps* bsi)
{
    bsi->api->waitExternal(bsi);
}

void stepvm_fx_loop(FutoInAsyncSteps* bsi, uintptr_t data, const char* label)
{
    bsi->api->loop(bsi, (void*)data, fx_loop, label);
}

void stepvm_fx_repeat(FutoInAsyncSteps* bsi, uintptr_t data, size_t count, const char* label)
{
    bsi->api->repeat(bsi, (void*)data, count, fx_repeat, label);
}

void stepvm_fx_break_loop(FutoInAsyncSteps* bsi, const char* label)
{
    bsi->api->breakLoop(bsi, label);
}

void stepvm_fx_continue_loop(FutoInAsyncSteps* bsi, const char* label)
{
    bsi->api->continueLoop(bsi, label);
}

void stepvm_fx_execute(FutoInAsyncSteps* bsi)
{
    bsi->api->execute(bsi, NULL, NULL);
}

void stepvm_fx_cancel(FutoInAsyncSteps* bsi)
{
    bsi->api->cancel(bsi);
}

void stepvm_fx_add_sync(FutoInAsyncSteps* bsi, FutoInSync* sync, uintptr_t data, int with_eh)
{
    bsi->api->addSync(bsi, sync, (void*)data, fx_exec, with_eh ? fx_error : NULL);
}

int stepvm_fx_is_valid(FutoInAsyncSteps* bsi)
{
    return bsi->api->isValid(bsi);
}

FutoInAsyncSteps* stepvm_fx_new_instance(FutoInAsyncSteps* bsi)
{
    return bsi->api->newInstance(bsi);
}

void stepvm_fx_free(FutoInAsyncSteps* bsi)
{
    bsi->api->free(bsi);
}
