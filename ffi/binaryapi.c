// The function table of stepvm's FutoInAsyncSteps and FutoInSync, and the
// shims through which Go calls C. Every entry forwards to the exported Go
// function named after it (api_add to stepvmAdd, sync_lock to
// stepvmSyncLock; both sched_immediate and sched_deferred to
// stepvmSchedule: see api.go and sync.go), adding the id of the loop on
// whose behalf the calling C code runs, so that Go can tell which flow a
// misuse belongs to even when the FutoInAsyncSteps pointer itself is bad.

#include "ffi.h"
#include "_cgo_export.h"

static _Thread_local uint32_t stepvm_cur;

#define CALL(expr)                  \
    do {                            \
        uint32_t saved = stepvm_cur; \
        stepvm_cur = loop;          \
        expr;                       \
        stepvm_cur = saved;         \
    } while (0)

void stepvm_call_exec(FutoInAsyncSteps_execute_callback f, uintptr_t bsi,
        uintptr_t data, const FutoInArgs* args, uint32_t loop)
{
    CALL(f((FutoInAsyncSteps*)bsi, (void*)data, args));
}

void stepvm_call_error(FutoInAsyncSteps_error_callback f, uintptr_t bsi,
        uintptr_t data, const char* code, uint32_t loop)
{
    CALL(f((FutoInAsyncSteps*)bsi, (void*)data, code));
}

void stepvm_call_cancel(FutoInAsyncSteps_cancel_callback f, uintptr_t bsi,
        uintptr_t data, uint32_t loop)
{
    CALL(f((FutoInAsyncSteps*)bsi, (void*)data));
}

void stepvm_call_loop(stepvm_loop_fn f, uintptr_t bsi, uintptr_t data, uint32_t loop)
{
    CALL(f((FutoInAsyncSteps*)bsi, (void*)data));
}

void stepvm_call_repeat(stepvm_repeat_fn f, uintptr_t bsi, uintptr_t data,
        size_t i, uint32_t loop)
{
    CALL(f((FutoInAsyncSteps*)bsi, (void*)data, i));
}

void stepvm_call_cb(stepvm_cb_fn f, uintptr_t data, uint32_t loop)
{
    CALL(f((void*)data));
}

uintptr_t stepvm_call_alloc(stepvm_alloc_fn f, uintptr_t data, uint32_t loop)
{
    void* p;
    CALL(p = f((void*)data));
    return (uintptr_t)p;
}

void stepvm_call_state_cleanup(stepvm_state_cleanup_fn f, uintptr_t data, uintptr_t value,
        uint32_t loop)
{
    CALL(f((void*)data, (void*)value));
}

void stepvm_call_stack_cleanup(stepvm_stack_cleanup_fn f, void* value, uint32_t loop)
{
    CALL(f(value));
}

void stepvm_call_sync(stepvm_sync_fn f, uintptr_t bsi, uintptr_t sync,
        uint32_t loop)
{
    CALL(f((FutoInAsyncSteps*)bsi, (FutoInSync*)sync));
}

void stepvm_cleanup_value(const FutoInType* type, uint64_t u, uintptr_t custom_data,
        uint32_t length, uint32_t loop)
{
    FutoInBinaryValue v = {.type = type, .u64 = u, .custom_data = (void*)custom_data, .length = length};
    CALL(futoin_reset_binval(&v));
}

void stepvm_cleanup_arg(FutoInBinaryValue* v, uint32_t loop)
{
    CALL(futoin_reset_binval(v));
}

// ---------------------------------------------------------------------------
// Value types.

#define T(tag) {(tag), 0}
const FutoInType stepvm_base_types[16] = {
        T(0), T(FTN_TYPE_CUSTOM_OBJECT), T(FTN_TYPE_STRING), T(FTN_TYPE_STRING16),
        T(FTN_TYPE_STRING32), T(FTN_TYPE_BOOL), T(FTN_TYPE_INT8), T(FTN_TYPE_INT16),
        T(FTN_TYPE_INT32), T(FTN_TYPE_INT64), T(FTN_TYPE_UINT8), T(FTN_TYPE_UINT16),
        T(FTN_TYPE_UINT32), T(FTN_TYPE_UINT64), T(FTN_TYPE_FLOAT), T(FTN_TYPE_DOUBLE),
};
#undef T
const FutoInType stepvm_bytes_type = {FTN_TYPE_ARRAY | FTN_TYPE_UINT8, 0};
const FutoInType stepvm_go_value_type = {FTN_TYPE_CUSTOM_OBJECT, 0};
const FutoInArgs stepvm_no_args;

// ---------------------------------------------------------------------------
// The FutoInAsyncSteps function table, in the specification's index order.

static void api_add(FutoInAsyncSteps* bsi, void* data,
        FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps_error_callback eh)
{
    stepvmAdd(bsi, (uintptr_t)data, f, eh, stepvm_cur);
}

static FutoInAsyncSteps* api_parallel(FutoInAsyncSteps* bsi, void* data,
        FutoInAsyncSteps_error_callback eh)
{
    return stepvmParallel(bsi, (uintptr_t)data, eh, stepvm_cur);
}

static void* api_state_variable(FutoInAsyncSteps* bsi, void* data, const char* name,
        void* (*allocate)(void* data), void (*cleanup)(void* data, void* value))
{
    return (void*)stepvmStateVariable(bsi, (uintptr_t)data, (char*)name, allocate, cleanup, stepvm_cur);
}

static void* api_stack(FutoInAsyncSteps* bsi, size_t data_size, void (*cleanup)(void* value))
{
    return stepvmStack(bsi, data_size, cleanup, stepvm_cur);
}

static void api_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    stepvmSuccess(bsi, args, stepvm_cur);
}

static void api_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    stepvmHandleError(bsi, (char*)code, (char*)info, stepvm_cur);
}

static void api_set_timeout(FutoInAsyncSteps* bsi, uint32_t timeout_ms)
{
    stepvmSetTimeout(bsi, timeout_ms, stepvm_cur);
}

static void api_set_cancel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_cancel_callback ch)
{
    stepvmSetCancel(bsi, (uintptr_t)data, ch, stepvm_cur);
}

static void api_wait_external(FutoInAsyncSteps* bsi)
{
    stepvmWaitExternal(bsi, stepvm_cur);
}

static void api_loop(FutoInAsyncSteps* bsi, void* data,
        void (*f)(FutoInAsyncSteps* bsi, void* data), const char* label)
{
    stepvmLoop(bsi, (uintptr_t)data, f, (char*)label, stepvm_cur);
}

static void api_repeat(FutoInAsyncSteps* bsi, void* data, size_t count,
        void (*f)(FutoInAsyncSteps* bsi, void* data, size_t i), const char* label)
{
    stepvmRepeat(bsi, (uintptr_t)data, count, f, (char*)label, stepvm_cur);
}

static void api_break_loop(FutoInAsyncSteps* bsi, const char* label)
{
    stepvmBreakLoop(bsi, (char*)label, stepvm_cur);
}

static void api_continue_loop(FutoInAsyncSteps* bsi, const char* label)
{
    stepvmContinueLoop(bsi, (char*)label, stepvm_cur);
}

static void api_execute(FutoInAsyncSteps* bsi, void* data,
        FutoInAsyncSteps_error_callback unhandled_error)
{
    stepvmExecute(bsi, (uintptr_t)data, unhandled_error, stepvm_cur);
}

static void api_cancel(FutoInAsyncSteps* bsi)
{
    stepvmCancel(bsi, stepvm_cur);
}

static void api_add_sync(FutoInAsyncSteps* bsi, FutoInSync* sync, void* data,
        FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps_error_callback eh)
{
    stepvmAddSync(bsi, sync, (uintptr_t)data, f, eh, stepvm_cur);
}

static ptrdiff_t api_root_id(FutoInAsyncSteps* bsi)
{
    return stepvmRootId(bsi, stepvm_cur);
}

static int api_is_valid(FutoInAsyncSteps* bsi)
{
    return stepvmIsValid(bsi, stepvm_cur);
}

static FutoInAsyncSteps* api_new_instance(FutoInAsyncSteps* bsi)
{
    return stepvmNewInstance(bsi, stepvm_cur);
}

static void api_free(FutoInAsyncSteps* bsi)
{
    stepvmFree(bsi, stepvm_cur);
}

static FutoInHandle api_sched_immediate(FutoInAsyncSteps* bsi, void* data, void (*cb)(void* data))
{
    FutoInHandle h = {0, 0, 0};
    stepvmSchedule(bsi, 0, 0, (uintptr_t)data, cb, &h, stepvm_cur);
    return h;
}

static FutoInHandle api_sched_deferred(FutoInAsyncSteps* bsi, uint32_t delay_ms, void* data,
        void (*cb)(void* data))
{
    FutoInHandle h = {0, 0, 0};
    stepvmSchedule(bsi, 1, delay_ms, (uintptr_t)data, cb, &h, stepvm_cur);
    return h;
}

static void api_sched_cancel(FutoInAsyncSteps* bsi, FutoInHandle* handle)
{
    stepvmSchedCancel(bsi, handle, stepvm_cur);
}

static int api_sched_is_valid(FutoInAsyncSteps* bsi, FutoInHandle* handle)
{
    return stepvmSchedIsValid(bsi, handle, stepvm_cur);
}

static int api_is_same_thread(FutoInAsyncSteps* bsi)
{
    return stepvmIsSameThread(bsi, stepvm_cur);
}

const FutoInAsyncStepsAPI stepvm_api = {{{
        .add = api_add,
        .parallel = api_parallel,
        .stateVariable = api_state_variable,
        .stack = api_stack,
        .success = api_success,
        .handle_error = api_handle_error,
        .setTimeout = api_set_timeout,
        .setCancel = api_set_cancel,
        .waitExternal = api_wait_external,
        .loop = api_loop,
        .repeat = api_repeat,
        .breakLoop = api_break_loop,
        .continueLoop = api_continue_loop,
        .execute = api_execute,
        .cancel = api_cancel,
        .addSync = api_add_sync,
        .rootId = api_root_id,
        .isValid = api_is_valid,
        .newInstance = api_new_instance,
        .free = api_free,
        .sched_immediate = api_sched_immediate,
        .sched_deferred = api_sched_deferred,
        .sched_cancel = api_sched_cancel,
        .sched_is_valid = api_sched_is_valid,
        .is_same_thread = api_is_same_thread,
}}};

// ---------------------------------------------------------------------------
// The FutoInSync function table of stepvm's Go primitives.

static void sync_lock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    stepvmSyncLock(bsi, sync, stepvm_cur);
}

static void sync_unlock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    stepvmSyncUnlock(bsi, sync, stepvm_cur);
}

const FutoInSyncAPI stepvm_sync_api = {{{
        .lock = sync_lock,
        .unlock = sync_unlock,
}}};
