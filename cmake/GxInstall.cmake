function(gx_install_dummy)
endfunction()
