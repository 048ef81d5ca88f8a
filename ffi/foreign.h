/*
 * Internal declarations of package ffi for FutoInAsyncSteps implemented by
 * foreign code (ffi.Wrap): calls from Go into such a table, and the C
 * functions a foreign engine calls back to run Go code. Not a public header.
 *
 * Go objects cross as ids (uintptr_t), never as pointers: the id of an entry
 * in a Go-side table, which Go looks up when the foreign engine hands it
 * back. See foreign_table.go.
 */
#ifndef STEPVM_FOREIGN_H
#define STEPVM_FOREIGN_H

#include "ffi.h"

/* Indexes of the entries of FutoInAsyncStepsAPI (Go reads the table to
 * learn which entries are set). */
enum
{
    stepvm_fx_add_i = 0,
    stepvm_fx_parallel_i = 1,
    stepvm_fx_state_variable_i = 2,
    stepvm_fx_stack_i = 3,
    stepvm_fx_success_i = 4,
    stepvm_fx_handle_error_i = 5,
    stepvm_fx_set_timeout_i = 6,
    stepvm_fx_set_cancel_i = 7,
    stepvm_fx_wait_external_i = 8,
    stepvm_fx_loop_i = 9,
    stepvm_fx_repeat_i = 10,
    stepvm_fx_break_loop_i = 11,
    stepvm_fx_continue_loop_i = 12,
    stepvm_fx_execute_i = 13,
    stepvm_fx_cancel_i = 14,
    stepvm_fx_add_sync_i = 15,
    stepvm_fx_is_valid_i = 17,
    stepvm_fx_new_instance_i = 18,
    stepvm_fx_free_i = 19,
};

/* Calls through a foreign table; data is the id of the Go object the
 * callbacks run. Callers check that the entry is set. */
void stepvm_fx_add(FutoInAsyncSteps* bsi, uintptr_t data, int with_eh);
FutoInAsyncSteps* stepvm_fx_parallel(FutoInAsyncSteps* bsi, uintptr_t data, int with_eh);
uintptr_t stepvm_fx_state_variable(FutoInAsyncSteps* bsi, const char* name);
void* stepvm_fx_stack(FutoInAsyncSteps* bsi, size_t size, uintptr_t destroy);
void stepvm_fx_success(FutoInAsyncSteps* bsi, FutoInArgs* args);
void stepvm_fx_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info);
void stepvm_fx_set_timeout(FutoInAsyncSteps* bsi, uint32_t ms);
void stepvm_fx_set_cancel(FutoInAsyncSteps* bsi, uintptr_t data);
void stepvm_fx_wait_external(FutoInAsyncSteps* bsi);
void stepvm_fx_loop(FutoInAsyncSteps* bsi, uintptr_t data, const char* label);
void stepvm_fx_repeat(FutoInAsyncSteps* bsi, uintptr_t data, size_t count, const char* label);
void stepvm_fx_break_loop(FutoInAsyncSteps* bsi, const char* label);
void stepvm_fx_continue_loop(FutoInAsyncSteps* bsi, const char* label);
void stepvm_fx_execute(FutoInAsyncSteps* bsi);
void stepvm_fx_cancel(FutoInAsyncSteps* bsi);
void stepvm_fx_add_sync(FutoInAsyncSteps* bsi, FutoInSync* sync, uintptr_t data, int with_eh);
int stepvm_fx_is_valid(FutoInAsyncSteps* bsi);
FutoInAsyncSteps* stepvm_fx_new_instance(FutoInAsyncSteps* bsi);
void stepvm_fx_free(FutoInAsyncSteps* bsi);

/* Value types of what Go hands a foreign engine: strings and byte arrays
 * in malloc'd memory that their cleanup frees, and Go values as custom
 * objects whose custom_data is an id, released by their cleanup. */
extern const FutoInType stepvm_fx_string_type;
extern const FutoInType stepvm_fx_bytes_type;
extern const FutoInType stepvm_fx_go_type;

/* Offset of the memory stepvm_fx_stack returns in what stack allocated. */
enum
{
    stepvm_fx_stack_header = 16
};

#endif /* STEPVM_FOREIGN_H */
