// tritium core: handing freed heap memory back to the operating system.
#pragma once

namespace tritium {

/// Returns the heap's free pages to the OS (glibc's malloc_trim(0); a no-op with other C libraries). Model
/// loading frees large temporaries (a fused projection's int8 codes, 25 MB for Qwen3-1.7B's gate|up) that glibc
/// keeps mapped below the top of the heap; without this they count in the process's resident memory until exit.
void release_free_heap();

}  // namespace tritium
