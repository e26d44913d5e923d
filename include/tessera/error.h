/** \file
 * Errors: whose fault and where (DESIGN.md D9).
 *
 * `TS_CHECK(cond, ShapeError) << "[op] message"` throws a typed `tessera::Error` when `cond` is
 * false; the message is built only on failure. `TS_INTERNAL_ASSERT(cond) << ...` marks tessera's
 * own bugs. Every error records the user's source line when one is known: public entry points
 * (op functions, kernel launches, compiled calls) install a `UserLocGuard`, and an error thrown
 * anywhere below picks the outermost location up.
 */
#pragma once

#include <iosfwd>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tessera {

/** A position in the user's source, captured with `__builtin_FILE()`/`__builtin_LINE()`. */
struct SourceLoc {
  const char* file = nullptr;
  int line = 0;

  static constexpr SourceLoc current(const char* file = __builtin_FILE(),
                                     int line = __builtin_LINE()) {
    return SourceLoc{file, line};
  }
  constexpr bool known() const { return file != nullptr && line > 0; }
};

/** Prints `file.cpp:12` (the base name of the file). */
std::ostream& operator<<(std::ostream& os, const SourceLoc& loc);

/** The innermost-outermost user location: the first guard on a thread wins. */
class UserLocGuard {
 public:
  explicit UserLocGuard(SourceLoc loc) noexcept;
  ~UserLocGuard();
  UserLocGuard(const UserLocGuard&) = delete;
  UserLocGuard& operator=(const UserLocGuard&) = delete;

  /** The user location active on this thread, or an unknown one. */
  static SourceLoc current() noexcept;

 private:
  bool installed_;
};

/** Base of every error tessera throws for bad input. */
class Error : public std::runtime_error {
 public:
  Error(const std::string& msg, SourceLoc user_loc = UserLocGuard::current());

  /** The message without the location suffix. */
  const std::string& message() const { return message_; }
  /** The user's source line, when known. */
  SourceLoc user_loc() const { return user_loc_; }
  /** A short name of the error type, e.g. "ShapeError". */
  virtual const char* kind() const { return "Error"; }

 private:
  std::string message_;
  SourceLoc user_loc_;
};

#define TS_DEFINE_ERROR(Name)                           \
  class Name : public Error {                           \
   public:                                              \
    using Error::Error;                                 \
    const char* kind() const override { return #Name; } \
  }

/** A value is out of its allowed set (bad argument value). */
TS_DEFINE_ERROR(ValueError);
/** An argument has the wrong kind (a tensor where an int is needed, ...). */
TS_DEFINE_ERROR(TypeError);
/** An index or dimension is out of range. */
TS_DEFINE_ERROR(IndexError);
/** Shapes do not match or do not broadcast. */
TS_DEFINE_ERROR(ShapeError);
/** A dtype is not supported or does not promote. */
TS_DEFINE_ERROR(DTypeError);
/** Tensors on different or unavailable devices. */
TS_DEFINE_ERROR(DeviceError);
/** A tensor's data was read where there is none (meta and fake tensors): under the graph
 * compiler, a graph break. */
class DataError : public ValueError {
 public:
  using ValueError::ValueError;
  const char* kind() const override { return "DataError"; }
};
/** A kernel or graph cannot be compiled. */
TS_DEFINE_ERROR(CompileError);
/** A feature that does not exist (yet) was asked for. */
TS_DEFINE_ERROR(NotImplementedError);
/** A failure at run time that is not the caller's fault alone (I/O, system compiler). */
TS_DEFINE_ERROR(RuntimeError);
/** Memory for a tensor could not be had (after the allocator gave its cached blocks back and
 * tried once more); the message names the size and what the device has free. */
class OutOfMemoryError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
  const char* kind() const override { return "OutOfMemoryError"; }
};
/** A bug in tessera itself. */
TS_DEFINE_ERROR(InternalError);
/** A check of values failed (`testing::assert_close`). */
TS_DEFINE_ERROR(AssertionError);

#undef TS_DEFINE_ERROR

namespace detail {

/** Accumulates a message with `<<` and throws `E` when handed to `Thrower`. */
template <class E>
class ErrorBuilder {
 public:
  ErrorBuilder(const char* cond, const char* file, int line)
      : cond_(cond), file_(file), line_(line) {}
  template <class T>
  ErrorBuilder& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] void raise() {
    std::string msg = os_.str();
    if (msg.empty()) msg = std::string("check failed: ") + cond_;
    if constexpr (std::is_same_v<E, InternalError>) {
      msg = "internal error (a tessera bug, please report it) at " + std::string(file_) + ":" +
            std::to_string(line_) + ": " + msg + " [" + cond_ + "]";
    }
    throw E(msg);
  }

 private:
  std::ostringstream os_;
  const char* cond_;
  const char* file_;
  int line_;
};

struct Thrower {
  template <class E>
  [[noreturn]] void operator&(ErrorBuilder<E>& b) const {
    b.raise();
  }
};

}  // namespace detail
}  // namespace tessera

/** Throws `ErrorType` (default `ValueError`) with the streamed message when `cond` is false. */
#define TS_CHECK(cond, ...)                                                                \
  if (__builtin_expect(static_cast<bool>(cond), 1)) {                                      \
  } else                                                                                   \
    ::tessera::detail::Thrower() &                                                         \
        ::tessera::detail::ErrorBuilder<TS_CHECK_ERROR_TYPE(__VA_ARGS__)>(#cond, __FILE__, \
                                                                          __LINE__)        \
            .                                                                              \
            operator<<("")

#define TS_CHECK_ERROR_TYPE(...) \
  TS_CHECK_ERROR_TYPE_I(__VA_ARGS__ __VA_OPT__(, )::tessera::ValueError)
#define TS_CHECK_ERROR_TYPE_I(T, ...) T

/** Throws `ErrorType` unconditionally with the streamed message. */
#define TS_ERROR(ErrorType)      \
  ::tessera::detail::Thrower() & \
      ::tessera::detail::ErrorBuilder<ErrorType>("error", __FILE__, __LINE__).operator<<("")

/** Marks an invariant of tessera itself; a failure is a tessera bug. */
#define TS_INTERNAL_ASSERT(cond)                                                             \
  if (__builtin_expect(static_cast<bool>(cond), 1)) {                                        \
  } else                                                                                     \
    ::tessera::detail::Thrower() &                                                           \
        ::tessera::detail::ErrorBuilder<::tessera::InternalError>(#cond, __FILE__, __LINE__) \
            .                                                                                \
            operator<<("")
