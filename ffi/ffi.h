/*
 * Internal declarations of package ffi: the C half of the mapping of the
 * FTN12 2.7 binary interface onto stepvm. Not a public header.
 */
#ifndef STEPVM_FFI_H
#define STEPVM_FFI_H

#include <stdlib.h>
#include <string.h>

#include "futoin/binaryapi.h"

/*
 * stepvm_bsi is stepvm's FutoInAsyncSteps. It lives in off-heap memory that
 * is only ever used for such records, so its api pointer stays valid for
 * the life of the process: a call through a record whose step has ended
 * reaches stepvm, which sees that gen no longer matches the Go side's
 * table entry idx. It holds no Go pointer.
 */
typedef struct stepvm_bsi
{
    FutoInAsyncSteps base;
    uint32_t idx;
    uint32_t gen;
} stepvm_bsi;

/* stepvm_sync is stepvm's FutoInSync for a Go primitive; same scheme. */
typedef struct stepvm_sync
{
    FutoInSync base;
    uint32_t idx;
    uint32_t gen;
} stepvm_sync;

/* Function pointer types the specification leaves unnamed. */
typedef void (*stepvm_loop_fn)(FutoInAsyncSteps* bsi, void* data);
typedef void (*stepvm_repeat_fn)(FutoInAsyncSteps* bsi, void* data, size_t i);
typedef void* (*stepvm_alloc_fn)(void* data);
typedef void (*stepvm_state_cleanup_fn)(void* data, void* value);
typedef void (*stepvm_stack_cleanup_fn)(void* value);
typedef void (*stepvm_cb_fn)(void* data);
typedef void (*stepvm_value_cleanup_fn)(FutoInBinaryValue* v);
typedef void (*stepvm_sync_fn)(FutoInAsyncSteps* bsi, FutoInSync* sync);

extern const FutoInAsyncStepsAPI stepvm_api;
extern const FutoInSyncAPI stepvm_sync_api;

/* Value types stepvm hands to C steps; none has a cleanup. */
extern const FutoInType stepvm_base_types[16]; /* indexed by base type tag */
extern const FutoInType stepvm_bytes_type;     /* FTN_TYPE_ARRAY | FTN_TYPE_UINT8 */
extern const FutoInType stepvm_go_value_type;  /* a Go value: opaque to C */
extern const FutoInArgs stepvm_no_args;

/*
 * Calls into C code. Each records, for the C function's duration, the id of
 * the loop on whose behalf it runs in a thread-local variable, which the
 * functions of the table pass on to Go: a C function runs on one thread
 * until it returns, and so do the calls it makes back into stepvm.
 *
 * C data pointers cross into Go as uintptr_t: C code may store any integer
 * in a void*, and Go must never hold a value that is not a valid pointer in
 * a pointer type (the runtime checks stacks for such values). The records
 * (FutoInAsyncSteps, FutoInSync) cross from Go as uintptr_t too: they live
 * in memory Go does not manage, and as pointers to structures with pointers
 * each call would check that they are not Go pointers.
 */
void stepvm_call_exec(FutoInAsyncSteps_execute_callback f, uintptr_t bsi,
        uintptr_t data, const FutoInArgs* args, uint32_t loop);
void stepvm_call_error(FutoInAsyncSteps_error_callback f, uintptr_t bsi,
        uintptr_t data, const char* code, uint32_t loop);
void stepvm_call_cancel(FutoInAsyncSteps_cancel_callback f, uintptr_t bsi,
        uintptr_t data, uint32_t loop);
void stepvm_call_loop(stepvm_loop_fn f, uintptr_t bsi, uintptr_t data, uint32_t loop);
void stepvm_call_repeat(stepvm_repeat_fn f, uintptr_t bsi, uintptr_t data,
        size_t i, uint32_t loop);
void stepvm_call_cb(stepvm_cb_fn f, uintptr_t data, uint32_t loop);
uintptr_t stepvm_call_alloc(stepvm_alloc_fn f, uintptr_t data, uint32_t loop);
void stepvm_call_state_cleanup(stepvm_state_cleanup_fn f, uintptr_t data, uintptr_t value,
        uint32_t loop);
void stepvm_call_stack_cleanup(stepvm_stack_cleanup_fn f, void* value, uint32_t loop);
void stepvm_call_sync(stepvm_sync_fn f, uintptr_t bsi, uintptr_t sync,
        uint32_t loop);
/* stepvm_cleanup_value runs the cleanup of a value rebuilt from its fields. */
void stepvm_cleanup_value(const FutoInType* type, uint64_t u, uintptr_t custom_data,
        uint32_t length, uint32_t loop);
/* stepvm_cleanup_arg runs the cleanup of a value in place. */
void stepvm_cleanup_arg(FutoInBinaryValue* v, uint32_t loop);

/* Offsets the Go mirror of FutoInBinaryValue is checked against. */
enum
{
    stepvm_off_binval_u = offsetof(FutoInBinaryValue, u64),
    stepvm_off_binval_custom = offsetof(FutoInBinaryValue, custom_data),
    stepvm_off_binval_length = offsetof(FutoInBinaryValue, length),
    stepvm_size_binval = sizeof(FutoInBinaryValue),
};

#endif /* STEPVM_FFI_H */
