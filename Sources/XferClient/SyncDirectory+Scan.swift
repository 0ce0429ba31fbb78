import Foundation
import XferCore
import XferProtocol

// Reading the local tree: what a pass sees as documents (docs/SYNC.md, "What is a document").
extension SyncDirectory {
    /// A local document: its kind and absolute path.
    struct LocalDocument {
        var kind: DocumentKind
        var path: String
        /// A regular file's stamp as the scan saw it (`nil` for symlinks and packages).
        var stamp: FileStamp? = nil
        /// A directory's permission bits as the scan saw them.
        var mode: UInt32 = 0
        /// Its document path (checked once, by the scan).
        var document: DocumentPath? = nil
    }

    /// Names the engine never syncs wherever they are: its own staging copies and the built-in
    /// defaults (``IgnoreRules/defaultPatterns``). `.xferignore` files can add more.
    /// - Parameter name: A file name.
    /// - Returns: Whether the defaults ignore it.
    public static func isIgnored(_ name: String) -> Bool {
        IgnoreRules.defaults.isIgnoredItself(name, isDirectory: false)
    }

    /// Every document on disk that is not ignored: files and symlinks, and directories with a
    /// package extension; ignored directories are not entered. Also the names that are not
    /// valid document paths, the ignore rules read on the way (every `.xferignore` outside
    /// packages, `options.exclude`, the defaults), and what could not be read. A name that
    /// vanishes while it is scanned is simply not there; one that cannot be read for another
    /// reason (a directory made unreadable, an I/O error) is in `unreadable`, and nothing under
    /// it may be decided absent (docs/SYNC.md, "A tree that changes while it is read").
    /// - Parameter expected: About how many documents there are (the state's count), so the
    ///   table of them is sized once instead of grown step by step.
    func scanLocal(expected: Int = 0) -> (
        documents: [String: LocalDocument], invalid: [String], ignore: IgnoreRules, unreadable: [String: String]
    ) {
        var documents: [String: LocalDocument] = [:]
        documents.reserveCapacity(expected + expected / 8)
        let (invalid, rules, unreadable) = walkLocal { key, document in
            documents[key] = document
            return true
        }
        return (documents, invalid, rules, unreadable)
    }

    /// Walks the directory as a pass sees it (ignore rules, packages, names that are not valid
    /// documents, what cannot be read), handing each local document to `found`, which returns
    /// whether to go on. The one walk every reading of the tree uses.
    func walkLocal(_ found: (String, LocalDocument) -> Bool) -> (
        invalid: [String], ignore: IgnoreRules, unreadable: [String: String]
    ) {
        var invalid: [String] = []
        var unreadable: [String: String] = [:]
        var rules = IgnoreRules(exclude: options.exclude)
        var going = true
        func visit(_ relative: String) {
            let absolute = relative.isEmpty ? directory : directory + "/" + relative
            rules.load(directory: absolute, as: relative)
            let names: [String]
            do {
                names = try FileSystem.list(absolute)
            } catch let error as XferError {
                if !error.isVanished || relative.isEmpty {
                    unreadable[relative] = error.cause.map { "\($0)" } ?? error.message
                }
                return
            } catch {
                unreadable[relative] = "\(error)"
                return
            }
            // Each name is looked at relative to its directory: the kernel walks one component,
            // not the whole path, per file.
            let directoryFD = open(absolute, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { if directoryFD >= 0 { close(directoryFD) } }
            for name in names where going {
                let child = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                let looked =
                    directoryFD >= 0
                    ? fstatat(directoryFD, name, &info, AT_SYMLINK_NOFOLLOW) : lstat(absolute + "/" + name, &info)
                guard looked == 0 else {
                    let err = errno
                    if !SystemErrno.vanished(err) { unreadable[child] = SystemErrno(err).description }
                    continue
                }
                let type = info.st_mode & S_IFMT
                guard !rules.isIgnoredItself(child, isDirectory: type == S_IFDIR) else { continue }
                let isPackage =
                    type == S_IFDIR && options.packageExtensions.contains((name as NSString).pathExtension.lowercased())
                guard type == S_IFREG || type == S_IFLNK || type == S_IFDIR else { continue }
                guard let path = try? DocumentPath(child), path.value == child else {
                    invalid.append(child)
                    continue
                }
                // A directory is a document of its own (its name and mode), and what is in it
                // is walked: empty directories travel too.
                let kind: DocumentKind = type == S_IFDIR ? (isPackage ? .package : .directory) : .file
                going = found(
                    path.value,
                    LocalDocument(
                        kind: kind, path: absolute + "/" + name,
                        stamp: type == S_IFREG ? FileStamp(info) : nil,
                        mode: UInt32(info.st_mode) & 0o777, document: path))
                if going && kind == .directory { visit(child) }
            }
        }
        visit("")
        return (invalid, rules, unreadable)
    }

    /// Whether `path` is, or lies under, one of `unreadable`'s paths.
    static func isUnder(_ path: String, _ unreadable: [String: String]) -> Bool {
        guard !unreadable.isEmpty else { return false }
        if unreadable[""] != nil || unreadable[path] != nil { return true }
        var end = path.endIndex
        while let slash = path[..<end].lastIndex(of: "/") {
            if unreadable[String(path[..<slash])] != nil { return true }
            end = slash
        }
        return false
    }
}
