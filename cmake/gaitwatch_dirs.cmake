# gw_full_install_dir(OUT NAME DIR PREFIX): the absolute directory that
# GNUInstallDirs gives as CMAKE_INSTALL_FULL_<NAME> when CMAKE_INSTALL_<NAME>
# is `DIR` and the prefix is `PREFIX`. Used at configure time and at install
# time, where the prefix may differ (`cmake --install --prefix P`, cpack):
# SYSCONFDIR and LOCALSTATEDIR go to /etc and /var for the prefixes / and
# /usr, and to /etc/opt/X and /var/opt/X for /opt/X; the rest lie under PREFIX.
function(gw_full_install_dir out name dir prefix)
  if(IS_ABSOLUTE "${dir}")
    set(full "${dir}")
  elseif(name MATCHES "^(SYSCONFDIR|LOCALSTATEDIR)$" AND prefix MATCHES "^/(usr/?)?$")
    set(full "/${dir}")
  elseif(name MATCHES "^(SYSCONFDIR|LOCALSTATEDIR)$" AND prefix MATCHES "^/opt/")
    string(REGEX REPLACE "/$" "" opt "${prefix}")
    set(full "/${dir}${opt}")
  else()
    set(full "${prefix}/${dir}")
  endif()
  string(REGEX REPLACE "//+" "/" full "${full}")
  string(REGEX REPLACE "(.)/$" "\\1" full "${full}")
  set(${out} "${full}" PARENT_SCOPE)
endfunction()
