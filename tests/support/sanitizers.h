// Which sanitizer this build runs under, for tests whose checks cannot hold there.
#pragma once

namespace inferlab::testing {

// Whether this build runs under AddressSanitizer (which turns a child's SIGSEGV into its own
// report and abort, reserves terabytes of address space and inflates the resident set).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace inferlab::testing
