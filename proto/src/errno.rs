//! Names of the errno values a reply's status can carry.

use nix::errno::Errno;

/// Generates the name table from nix's `Errno` variants, so that the
/// numbers come from the platform and the names cannot be misspelt.
macro_rules! names {
    ($($e:ident),* $(,)?) => {
        /// The symbolic name of `errno` ("EPERM"), or "EUNKNOWN" for a value
        /// outside the table (the errnos a filesystem daemon plausibly
        /// returns).
        pub fn errno_name(errno: i32) -> &'static str {
            match Errno::from_raw(errno) {
                $(Errno::$e => stringify!($e),)*
                _ => "EUNKNOWN",
            }
        }

        #[cfg(test)]
        const TABLE: &[Errno] = &[$(Errno::$e),*];
    };
}

names!(
    EPERM,
    ENOENT,
    ESRCH,
    EINTR,
    EIO,
    ENXIO,
    E2BIG,
    EBADF,
    EAGAIN,
    ENOMEM,
    EACCES,
    EFAULT,
    EBUSY,
    EEXIST,
    EXDEV,
    ENODEV,
    ENOTDIR,
    EISDIR,
    EINVAL,
    ENFILE,
    EMFILE,
    ENOTTY,
    EFBIG,
    ENOSPC,
    ESPIPE,
    EROFS,
    EMLINK,
    EPIPE,
    ERANGE,
    EDEADLK,
    ENAMETOOLONG,
    ENOLCK,
    ENOSYS,
    ENOTEMPTY,
    ELOOP,
    ENODATA,
    ETIME,
    EPROTO,
    EBADMSG,
    EOVERFLOW,
    EUCLEAN,
    EMSGSIZE,
    EPROTONOSUPPORT,
    EOPNOTSUPP,
    ECONNRESET,
    ENOBUFS,
    ETIMEDOUT,
    ECONNREFUSED,
    ESTALE,
    EDQUOT,
    ECANCELED,
);

/// The human description of `errno` ("Operation not permitted").
pub fn errno_desc(errno: i32) -> &'static str {
    Errno::from_raw(errno).desc()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_the_protocol_errnos() {
        assert_eq!(errno_name(Errno::EPERM as i32), "EPERM");
        assert_eq!(errno_name(Errno::ENOTTY as i32), "ENOTTY");
        assert_eq!(errno_name(Errno::EINVAL as i32), "EINVAL");
        assert_eq!(errno_name(Errno::EOVERFLOW as i32), "EOVERFLOW");
        assert_eq!(errno_name(0), "EUNKNOWN");
        assert_eq!(errno_name(-1), "EUNKNOWN");
        assert_eq!(errno_name(100_000), "EUNKNOWN");
        assert_eq!(errno_desc(Errno::EPERM as i32), "Operation not permitted");
    }

    #[test]
    fn every_listed_errno_names_itself() {
        for &e in TABLE {
            assert_eq!(errno_name(e as i32), format!("{e:?}"));
        }
    }
}
